import FerryCore
@testable import FerryLocalStore
@testable import FerryS3
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Synchronization
import Testing

/// The transport against a server that accepts connections and never answers.
@Suite struct CurlTransportTests {
    /// A listening socket nobody accepts from: the kernel completes the
    /// handshake, the request is sent, and no byte ever comes back.
    final class SilentServer: Sendable {
        let fd: Int32
        let port: Int
        init() throws { (fd, port) = try LoopbackListener.listenOnLoopback() }
        deinit { close(fd) }
    }

    /// A cancelled task ends its request at once (the event loop is woken),
    /// not at the 30 s low-speed cut-off; the error says cancelled.
    @Test func cancellingTheTaskAbortsASilentRequest() async throws {
        let server = try SilentServer()
        let transport = CurlTransport()
        let request = Task { @Sendable () async throws -> HTTPResponse in
            try await transport.execute(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/never"))
        }
        #expect(await eventually(timeout: 10, every: 0.05) { transport.connectionsInUse == 1 })
        let started = ContinuousClock.now
        request.cancel()
        let result = await request.result
        let elapsed = ContinuousClock.now - started
        guard case .failure(let error) = result else { Issue.record("a silent server answered?"); return }
        #expect((error as? FerryError)?.code == .cancelled, "\(error)")
        // The loop is woken on cancellation; the bound leaves room for a loaded machine.
        #expect(elapsed < .seconds(5), "took \(elapsed) from the cancel; the low-speed cut-off is 30 s")
        #expect(transport.connectionsInUse == 0)
    }

    /// A task cancelled while it waits for a connection does not send its request.
    @Test func aRequestCancelledBeforeItStartsIsNotSent() async throws {
        let server = try SilentServer()
        let transport = CurlTransport(limits: .init(maxConnections: 1))
        let holder = Task { @Sendable () async throws -> HTTPResponse in
            try await transport.execute(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/first"))
        }
        try await Task.sleep(for: .milliseconds(300))
        let waiting = Task { @Sendable () async throws -> HTTPResponse in
            try await transport.execute(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/second"))
        }
        try await Task.sleep(for: .milliseconds(300))
        waiting.cancel()
        holder.cancel()
        for task in [holder, waiting] {
            guard case .failure(let error) = await task.result else { Issue.record("answered?"); continue }
            #expect((error as? FerryError)?.code == .cancelled, "\(error)")
        }
    }

    /// Accepts connections and holds them unanswered until `answerAll()`,
    /// which sends each a 200 and closes it.
    final class HeldResponder: Sendable {
        /// Connections held, and whether `answerAll` was called (one arriving later, on a slow machine, is answered at once).
        final class Held: Sendable { let state = Mutex<(connections: [Int32], answering: Bool)>(([], false)) }
        private let listener: LoopbackListener
        private let held = Held()
        var port: Int { listener.port }
        var holding: Int { held.state.withLock { $0.connections.count } }

        init() throws {
            let held = self.held
            listener = try LoopbackListener { connection in
                let now = held.state.withLock { s -> Bool in
                    if !s.answering { s.connections.append(connection) }
                    return s.answering
                }
                if now { Self.answer(connection) }
            }
        }

        static func answer(_ connection: Int32) {
            let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".utf8)
            _ = answer.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            close(connection)
        }

        func answerAll() {
            for connection in held.state.withLock({ s in s.answering = true; defer { s.connections = [] }; return s.connections }) {
                Self.answer(connection)
            }
        }
    }

    /// One transfer core: 48 requests in flight at once are all driven by the
    /// transport's event loops (two threads), not by a thread each; curl's
    /// callbacks for every one of them run on those threads.
    @Test func requestsInFlightShareTheLoopThreads() async throws {
        let server = try HeldResponder()
        let transport = CurlTransport(limits: .init(maxConnections: 64))
        let threads = Mutex<Set<UInt>>([])
        let requests = (0..<48).map { i in
            Task { @Sendable () async throws -> HTTPResponse in
                var request = HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/r\(i)")
                request.observer = ResponseObserver(head: { _, _ in threads.withLock { _ = $0.insert(UInt(pthread_self())) } },
                                                    body: { _ in threads.withLock { _ = $0.insert(UInt(pthread_self())) } })
                return try await transport.execute(request)
            }
        }
        // Returns as soon as all are held; a loaded machine (the suite runs tests side by side) may take long to open 48.
        #expect(await eventually(timeout: 60, every: 0.05) { server.holding == 48 }, "\(server.holding) connections held")
        #expect(transport.connectionsInUse == 48)
        server.answerAll()
        for request in requests {
            let response = try await request.value
            #expect(response.status == 200 && response.body == Array("ok".utf8))
        }
        #expect(threads.withLock { $0.count } <= 2, "callbacks ran on \(threads.withLock { $0.count }) threads")
        #expect(transport.connectionsInUse == 0)
    }

    /// Cancelling many requests at once ends them all at once.
    @Test func cancellingManyRequestsEndsThemAtOnce() async throws {
        let server = try SilentServer()
        let transport = CurlTransport(limits: .init(maxConnections: 64))
        let requests = (0..<48).map { i in
            Task { @Sendable () async throws -> HTTPResponse in
                try await transport.execute(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/r\(i)"))
            }
        }
        #expect(await eventually(timeout: 10, every: 0.05) { transport.connectionsInUse == 48 })
        let started = ContinuousClock.now
        requests.forEach { $0.cancel() }
        for request in requests {
            guard case .failure(let error) = await request.result else { Issue.record("a silent server answered?"); continue }
            #expect((error as? FerryError)?.code == .cancelled, "\(error)")
        }
        #expect(ContinuousClock.now - started < .seconds(5), "48 cancelled requests took \(ContinuousClock.now - started) to end")
        #expect(transport.connectionsInUse == 0)
    }

    /// The bandwidth limit holds for the whole transport, uploads and downloads
    /// alike, without a thread sleeping: requests are paused and resumed.
    @Test func theBandwidthLimitIsSharedAndPacesBothWays() async throws {
        let logs = try TestPaths.temporaryDirectory("bandwidth")
        defer { try? FileManager.default.removeItem(at: logs) }
        try await MotoServer.start(logDirectory: logs).stopAfter { moto in
            let s3 = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: moto.endpoint), region: "us-east-1",
                                    credentials: .init(accessKeyId: "testing", secretAccessKey: "testing"),
                                    limits: .init(bandwidthBytesPerSecond: 1 << 20)))
            try await s3.createBucket("paced")
            let body = (0..<(3 << 19)).map { UInt8(truncatingIfNeeded: $0 &* 31) }  // 1.5 MiB
            // Two uploads of 1.5 MiB at once share 1 MiB/s: about three seconds together
            // (never less; the upper bound only catches a stuck request on a loaded machine).
            var started = ContinuousClock.now
            async let a = s3.putObject(PutObjectInput(bucket: "paced", key: "a"), body: .bytes(body), progress: nil)
            async let b = s3.putObject(PutObjectInput(bucket: "paced", key: "b"), body: .bytes(body), progress: nil)
            _ = try await (a, b)
            let up = ContinuousClock.now - started
            #expect(up >= .milliseconds(2500) && up < .seconds(60), "3 MiB up at 1 MiB/s took \(up)")
            let file = logs.appendingPathComponent("down.bin")
            _ = FileManager.default.createFile(atPath: file.path, contents: nil)
            let fd = open(file.path, O_RDWR)
            defer { close(fd) }
            started = ContinuousClock.now
            async let c = s3.getObject(GetObjectInput(bucket: "paced", key: "a"), into: fd, at: 0, progress: nil)
            async let d = s3.getObject(GetObjectInput(bucket: "paced", key: "b"), into: fd, at: Int64(body.count), progress: nil)
            let got = try await (c, d)
            let down = ContinuousClock.now - started
            #expect(got.0.bytesReceived + got.1.bytesReceived == Int64(2 * body.count))
            #expect(down >= .milliseconds(2500) && down < .seconds(60), "3 MiB down at 1 MiB/s took \(down)")
            #expect(try Data(contentsOf: file) == Data(body + body))
        }
    }

    /// Buffers are sized per request: large for a GET, curl's default receive
    /// buffer for the rest, an upload buffer no larger than the body. Each
    /// stays below the worker's mmap threshold (128 KiB) for a small PUT.
    @Test func curlBuffersAreSizedForTheirRequest() {
        #expect(CurlTransport.receiveBufferSize(for: HTTPRequest(method: "GET", url: "http://x/")) == 256 << 10)
        for method in ["PUT", "HEAD", "POST", "DELETE"] {
            #expect(CurlTransport.receiveBufferSize(for: HTTPRequest(method: method, url: "http://x/")) == nil, "\(method)")
        }
        #expect(CurlTransport.uploadBufferSize(forBody: 0) == 16 << 10)
        #expect(CurlTransport.uploadBufferSize(forBody: 64 << 10) == 64 << 10)
        #expect(CurlTransport.uploadBufferSize(forBody: 8 << 20) == 256 << 10)
        for length in [0, 1, 4 << 10, 64 << 10, 100_000] as [Int64] {
            #expect(CurlTransport.uploadBufferSize(forBody: length) < 128 << 10)
        }
    }

    /// `--max-buffered-bytes` counts what a running request holds: curl's
    /// receive and upload buffers at the sizes set for it, a body in memory, and
    /// the write buffer of a body bound for a file. Each request is held by a
    /// server that never answers and the budget read meanwhile; the expected
    /// figures are written out, not computed with the transport's own functions.
    @Test func theBufferBudgetCountsWhatEachRequestHolds() async throws {
        let server = try SilentServer()
        let sink = try TestPaths.temporaryDirectory("budget").appendingPathComponent("sink")
        defer { try? FileManager.default.removeItem(at: sink.deletingLastPathComponent()) }
        _ = FileManager.default.createFile(atPath: sink.path, contents: nil)
        let fd = open(sink.path, O_RDWR)
        defer { close(fd) }
        #expect(ftruncate(fd, 8 << 20) == 0)  // the file-bodied PUT reads from it
        let url = "http://127.0.0.1:\(server.port)/held"
        let KiB = 1 << 10
        let cases: [(String, HTTPRequest, Int)] = [
            ("GET into memory", HTTPRequest(method: "GET", url: url), 256 * KiB + 16 * KiB),
            ("GET into a file", HTTPRequest(method: "GET", url: url, response: .file(descriptor: fd, offset: 0)), 256 * KiB + 16 * KiB + 256 * KiB),
            ("HEAD", HTTPRequest(method: "HEAD", url: url), 16 * KiB + 16 * KiB),
            ("PUT of 1 KiB", HTTPRequest(method: "PUT", url: url, body: .bytes([UInt8](repeating: 1, count: KiB))), 16 * KiB + 16 * KiB + KiB),
            ("PUT of 64 KiB", HTTPRequest(method: "PUT", url: url, body: .bytes([UInt8](repeating: 2, count: 64 * KiB))), 16 * KiB + 64 * KiB + 64 * KiB),
            ("PUT of 1 MiB", HTTPRequest(method: "PUT", url: url, body: .bytes([UInt8](repeating: 3, count: 1024 * KiB))), 16 * KiB + 256 * KiB + 1024 * KiB),
            ("PUT of 8 MiB from a file", HTTPRequest(method: "PUT", url: url, body: .file(descriptor: fd, offset: 0, length: 8 << 20)), 16 * KiB + 256 * KiB),
        ]
        let transport = CurlTransport()
        for (name, request, expected) in cases {
            let held = Task { @Sendable () async throws -> HTTPResponse in try await transport.execute(request) }
            #expect(await eventually(timeout: 10, every: 0.02) { transport.connectionsInUse == 1 }, "\(name)")
            #expect(transport.bufferedBytesInUse == Int64(expected), "\(name)")
            held.cancel()
            _ = await held.result
            #expect(transport.bufferedBytesInUse == 0, "\(name): released")
        }
    }

    /// One connection, hence one reused easy handle, serves GETs, PUTs, HEADs
    /// and DELETEs of every size in turn: whatever buffer sizes the request
    /// before left on the handle, each body arrives whole and unchanged.
    @Test func aReusedHandleCarriesEverySizeBothWays() async throws {
        let logs = try TestPaths.temporaryDirectory("reused-handle")
        defer { try? FileManager.default.removeItem(at: logs) }
        try await MotoServer.start(logDirectory: logs).stopAfter { moto in
            let s3 = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: moto.endpoint), region: "us-east-1",
                                    credentials: .init(accessKeyId: "testing", secretAccessKey: "testing"),
                                    limits: .init(maxConnections: 1)))
            try await s3.createBucket("sizes")
            let file = logs.appendingPathComponent("down.bin")
            // Sizes around curl's 16 KiB floor, the 128 KiB threshold and the 256 KiB buffers, large and small alternating.
            let sizes = [3 << 20, 0, 300_000, 1, (16 << 10) - 1, 1 << 20, 16 << 10, 131_073, (256 << 10) + 1, 64 << 10]
            for (i, size) in sizes.enumerated() {
                let body = (0..<size).map { UInt8(truncatingIfNeeded: ($0 &* 131) ^ i) }
                _ = try await s3.putObject(PutObjectInput(bucket: "sizes", key: "k\(i)"), body: .bytes(body), progress: nil)
                #expect(try await s3.headObject(bucket: "sizes", key: "k\(i)", headers: [:])?.size == Int64(size))
                _ = FileManager.default.createFile(atPath: file.path, contents: nil)
                let fd = open(file.path, O_RDWR)
                let got = try await s3.getObject(GetObjectInput(bucket: "sizes", key: "k\(i)"), into: fd, at: 0, progress: nil)
                close(fd)
                #expect(got.bytesReceived == Int64(size), "object \(i) of \(size) bytes")
                #expect(try Data(contentsOf: file) == Data(body), "object \(i) of \(size) bytes")
                if i % 2 == 1 { _ = try await s3.deleteObject(bucket: "sizes", key: "k\(i)") }
            }
            #expect(try await s3.headObject(bucket: "sizes", key: "k1", headers: [:]) == nil)
        }
    }
}
