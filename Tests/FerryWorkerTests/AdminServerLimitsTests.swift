import FerryTestSupport
@testable import FerryWorker
import Foundation
import Logging
import NIOCore
import Prometheus
import Testing

/// No client holds the worker's HTTP endpoints: a connection that does not
/// deliver its request in time is cut off, however it trickles, and past the
/// connection limit new connections are closed as they come, so descriptors
/// stay for transfers; the server answers again once they are gone.
@Suite struct AdminServerLimitsTests {
    struct ConnectFailed: Error { var reason: String }

    func server(maxConnections: Int = 128, requestTimeout: TimeAmount) async throws -> AdminServer {
        var limits = AdminServer.Limits()
        limits.maxConnections = maxConnections
        limits.requestTimeout = requestTimeout
        let router = AdminRouter(workerId: "w-1", health: WorkerHealth(), metrics: PrometheusCollectorRegistry(), inFlight: nil,
                                 engine: nil, state: nil)
        return try await AdminServer.start(address: "127.0.0.1:0", router: router, limits: limits, logger: Logger(label: "test.admin"))
    }

    // The socket calls block: each runs on a thread of its own, never on the
    // cooperative threads the servers' and other tests' tasks need, nor queued
    // behind other tests' work on the blocking pool.
    func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in Thread { continuation.resume(returning: body()) }.start() }
    }

    static func connect(_ port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { close(fd); throw ConnectFailed(reason: String(cString: strerror(errno))) }
        return fd
    }

    /// Whether the server closed `fd` (a read of 0 bytes, or a reset) within `seconds`.
    static func closedByServer(_ fd: Int32, within seconds: Double) -> Bool {
        let until = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date() < until {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 50) > 0 else { continue }
            if recv(fd, &buffer, buffer.count, 0) <= 0 { return true }
        }
        return false
    }

    func closedByServer(_ fd: Int32, within seconds: Double) async -> Bool {
        await onThread { Self.closedByServer(fd, within: seconds) }
    }

    /// The whole answer to `GET path` ("" when the connection is closed unanswered);
    /// `halfClose` ends the client's side once the request is sent, as `nc -N` does.
    func get(_ port: Int, _ path: String, method: String = "GET", halfClose: Bool = false) async -> String {
        await onThread {
            guard let fd = try? Self.connect(port) else { return "" }
            defer { close(fd) }
            let request = Array("\(method) \(path) HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
            _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if halfClose { shutdown(fd, Int32(SHUT_WR)) }
            var answer: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while poll(&poller, 1, 5_000) > 0 {
                let n = recv(fd, &buffer, buffer.count, 0)
                if n <= 0 { break }
                answer += buffer[0..<n]
            }
            return String(decoding: answer, as: UTF8.self)
        }
    }

    /// A client that ends its side after its request (`printf … | nc -N`) is
    /// answered (it used to be closed unanswered), and HEAD answers as GET does
    /// without the body (it was 405), for probes that ask either way.
    @Test func halfClosedRequestsAndHeadAreAnswered() async throws {
        let server = try await server(requestTimeout: .seconds(30))
        let closed = await get(server.port, "/healthz", halfClose: true)
        #expect(closed.hasPrefix("HTTP/1.1 200 OK") && closed.contains(#""worker":"w-1"}"#), "\(closed)")
        let full = await get(server.port, "/metrics")
        let head = await get(server.port, "/metrics", method: "HEAD")
        let headHalfClosed = await get(server.port, "/metrics", method: "HEAD", halfClose: true)
        #expect(full.hasPrefix("HTTP/1.1 200 OK"), "\(full)")
        for answer in [head, headHalfClosed] {
            #expect(answer.hasPrefix("HTTP/1.1 200 OK") && answer.hasSuffix("\r\n\r\n"), "\(answer)")
            #expect(answer == String(full.prefix(answer.count)), "HEAD's headers are GET's: \(answer) against \(full)")
        }
        await server.stop()
    }

    @Test func aSilentOrTricklingClientIsCutOffAtTheDeadline() async throws {
        let server = try await server(requestTimeout: .milliseconds(500))
        defer { Task { await server.stop() } }
        let started = Date()
        let silent = try Self.connect(server.port)
        defer { close(silent) }
        #expect(await closedByServer(silent, within: 10), "a silent connection was kept")
        #expect(Date().timeIntervalSince(started) >= 0.4, "closed before its deadline")

        // One byte of a request head every 100 ms, never ending: cut off all the same.
        let trickle = try Self.connect(server.port)
        defer { close(trickle) }
        let head = Array("GET /metrics HTTP/1.1\r\nX-Slow: ".utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 200)
        let cut = await onThread {
            head.contains { byte in
                var one = byte
                return send(trickle, &one, 1, Int32(MSG_NOSIGNAL)) <= 0 || Self.closedByServer(trickle, within: 0.1)
            }
        }
        #expect(cut, "a trickling request was read for 20 s")
        #expect(await get(server.port, "/metrics").hasPrefix("HTTP/1.1 200"))
    }

    @Test func pastTheLimitNewConnectionsAreClosedAtOnce() async throws {
        // The deadline is far: a close is the limit's, however slow the machine.
        let server = try await server(maxConnections: 4, requestTimeout: .seconds(3600))
        defer { Task { await server.stop() } }
        // One at a time, each seen kept before the next: the server admits connections on
        // its event loops' threads, so two opened at once may be counted in either order.
        var held: [Int32] = []
        defer { held.forEach { close($0) } }
        for _ in 0..<4 {
            held.append(try Self.connect(server.port))
            #expect(await !closedByServer(held.last!, within: 0.3), "one of the first four was closed")
        }
        #expect(await get(server.port, "/metrics").isEmpty, "a fifth connection was answered")
        let extra = try Self.connect(server.port)
        defer { close(extra) }
        #expect(await closedByServer(extra, within: 10), "a fifth connection was kept open")
        let stillHeld = held
        #expect(await onThread { !stillHeld.contains { Self.closedByServer($0, within: 0.05) } }, "a held connection was closed")
        // Two let go: the server answers again.
        close(held.removeLast()); close(held.removeLast())
        var answered = ""
        for _ in 0..<50 where !answered.hasPrefix("HTTP/1.1 200") {
            answered = await get(server.port, "/metrics")
            if !answered.hasPrefix("HTTP/1.1 200") { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(answered.hasPrefix("HTTP/1.1 200"), "\(answered)")
    }
}
