import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// The six findings of the hostile-input report, each through a real worker
/// (mock Kafka cluster, a real S3 server, kcat, boto3): the worker stays up,
/// each message has its outcome, nothing escapes, valid work still completes.
@Suite(.serialized) struct HostileInputRegressionTests {
    let logger = Logger(label: "test.hostile")

    struct Stored: Decodable {
        var ETag: String
        var Metadata: [String: String]
        var CacheControl: String?
        var ContentType: String?
    }

    /// Every object of every bucket, as boto3 sees it.
    static func everything(_ server: any S3TestServer) async throws -> [String: [String: Stored]] {
        try JSONDecoder().decode([String: [String: Stored]].self, from: Data(try await Boto3(server)("list-all").utf8))
    }

    /// A worker on a one-broker cluster against `server`, with victims to protect:
    /// another identity's protected and private objects, and a bucket named `private`.
    func withWorker(_ server: any S3TestServer, extra: [String] = [], environment: [String: String] = [:],
                    _ body: (EndToEndTests.Environment, BackgroundProcess) async throws -> Void) async throws {
        let base = try TestPaths.temporaryDirectory("hostile-\(server.name)")
        let env = try EndToEndTests.Environment.oneBroker(base: base, server: server, bucket: "hostile", logger: logger)
        let s3 = Boto3(server)
        for bucket in ["hostile", "private"] { try await s3("create-bucket", bucket) }
        let victim = base.appendingPathComponent("victim.txt")
        try Data("alice's bytes\n".utf8).write(to: victim)
        for (bucket, key) in [("hostile", "protected/alice/doc.txt"), ("hostile", "private/alice/secret.txt"), ("private", "alice/secret.txt")] {
            try await s3("put", bucket, key, victim.path)
        }
        try Data("ok\n".utf8).write(to: env.dataRoot.appendingPathComponent("ok.txt"))
        let worker = try WorkerCommandLine(bootstrapServers: env.cluster.bootstrapServers, storage: .s3(endpoint: server.endpoint),
                                           dataRoot: env.dataRoot, stateDirectory: base.appendingPathComponent("state"), extra: extra)
            .start(name: "worker-hostile", environment: server.clientEnvironment.merging(environment) { $1 }, logDirectory: base)
        do {
            try await body(env, worker)
        } catch {
            await worker.stop()
            throw error
        }
        await worker.stop()
        try? FileManager.default.removeItem(at: base)
    }

    /// Runs `body` against a fresh moto server, stopped before the test returns.
    func withMoto(_ label: String, _ body: (MotoServer) async throws -> Void) async throws {
        try await MotoServer.start(logDirectory: try TestPaths.temporaryDirectory(label)).stopAfter { moto in try await body(moto) }
    }

    func victimsUntouched(_ server: any S3TestServer, _ before: [String: [String: Stored]]) async throws {
        let after = try await Self.everything(server)
        for (bucket, key) in [("hostile", "protected/alice/doc.txt"), ("hostile", "private/alice/secret.txt"), ("private", "alice/secret.txt")] {
            #expect(after[bucket]?[key]?.ETag == before[bucket]?[key]?.ETag, "\(bucket)/\(key) changed or vanished")
        }
    }

    /// Findings 1, 3 and 6: numbers that trapped, header injection, invalid base64.
    @Test func trapsInjectionsAndBadBase64AreRefused() async throws {
        try await withMoto("hostile-moto") { moto in try await withWorker(moto) { env, worker in
            let ok = env.dataRoot.appendingPathComponent("ok.txt").absoluteString
            func up(_ id: String, _ extra: String, source: String? = nil) -> String {
                #"{"id":"\#(id)","op":"upload","bucket":"hostile","key":"\#(id).txt","source":"\#(source ?? ok)"\#(extra)}"#
            }
            let cases: [(String, String)] = [
                ("h-timeout-1e21", up("h-timeout-1e21", #","options":{"timeoutSeconds":1e21}"#)),
                ("h-timeout-2p63", up("h-timeout-2p63", #","options":{"timeoutSeconds":9223372036854775808}"#)),
                ("h-part-2p63", up("h-part-2p63", #","options":{"partSizeBytes":9223372036854775808}"#)),
                ("h-retry-big", up("h-retry-big", #","options":{"retryLimit":1e300}"#)),
                ("h-meta-crlf", up("h-meta-crlf", #","metadata":{"note":"a\r\nx-amz-meta-injected: yes"}"#)),
                ("h-header-lf", up("h-header-lf", #","headers":{"cache-control":"no-cache\nx-amz-meta-injected: yes"}"#)),
                ("h-type-crlf", up("h-type-crlf", #","contentType":"text/plain\r\nx-amz-meta-injected: yes""#)),
                ("h-data-type", up("h-data-type", "", source: #"data:text/plain\r\nx-amz-meta-injected: yes;base64,aGk="#)),
                ("h-meta-nul", up("h-meta-nul", #","metadata":{"note":"a\u0000b"}"#)),
                ("h-b64-pad", up("h-b64-pad", "", source: "data:;base64,====")),
                ("h-b64-bits", up("h-b64-bits", "", source: "data:;base64,QR==")),
            ]
            for (id, json) in cases { try await env.kcat.produce(topic: "ferry.requests", key: "hostile/\(id)", value: json) }
            try await env.kcat.produce(topic: "ferry.requests", key: "hostile/canary", value: up("h-canary", #","metadata":{"note":"fine"}"#))
            let canary = try await env.terminalStatus(of: "h-canary", timeout: 90)
            #expect(canary?.state == .completed, "\(worker.log.suffix(3000))")
            #expect(worker.isRunning)
            // Partitions are independent: wait for every outcome, not only the canary's.
            var statuses: [TransferStatus] = []
            _ = try await eventually(timeout: 30) {
                statuses = try await env.statuses()
                return cases.allSatisfy { c in statuses.contains { $0.id == c.0 && $0.state.isTerminal } }
            }
            for (id, _) in cases {
                let status = statuses.first { $0.id == id && $0.state.isTerminal }
                #expect(status?.state == .rejected && status?.error?.code == "InvalidRequest", "\(id): \(String(describing: status))")
            }
            let dlq = try await env.kcat.consumeAll(topic: "ferry.requests.dlq")
            #expect(dlq.count == cases.count)
            // Nothing injected reached storage: only the canary was written, with only its own metadata.
            let stored = try await Self.everything(moto)["hostile"] ?? [:]
            #expect(stored.keys.filter { $0.hasPrefix("public/") } == ["public/h-canary.txt"])
            let metadata = stored["public/h-canary.txt"]?.Metadata ?? [:]
            #expect(metadata["note"] == "fine" && metadata["injected"] == nil)
            #expect(Set(metadata.keys).isSubset(of: ["note", "ferry-transfer-id", "ferry-sequencer", "ferry-access-level"]))
        } }
    }

    /// Finding 2: dot segments never cross an access level or a bucket, and
    /// keys with every other odd character are stored exactly as given —
    /// against Ceph's gateway (it checks signatures) and moto.
    @Test(.enabled(if: CephGateway.isInstalled || ProcessInfo.processInfo.environment["CI"] != nil))
    func dotSegmentsNeverCrossLevelsOrBucketsOnCeph() async throws {
        try await CephGateway.start().stopAfter { rgw in try await keysAreLiteralOrRefused(rgw) }
    }

    @Test func dotSegmentsNeverCrossLevelsOrBucketsOnMoto() async throws {
        try await withMoto("hostile-moto-keys") { moto in try await keysAreLiteralOrRefused(moto) }
    }

    func keysAreLiteralOrRefused(_ server: any S3TestServer) async throws {
        try await withWorker(server) { env, worker in
            let before = try await Self.everything(server)
            let ok = env.dataRoot.appendingPathComponent("ok.txt").absoluteString
            let out = env.dataRoot.appendingPathComponent("stolen.txt")
            let escapes: [(String, String)] = [
                ("k-up-protected", #"{"id":"k-up-protected","op":"upload","bucket":"hostile","key":"../protected/alice/doc.txt","source":"\#(ok)"}"#),
                ("k-read-private", #"{"id":"k-read-private","op":"download","bucket":"hostile","key":"../private/alice/secret.txt","destination":"\#(out.absoluteString)"}"#),
                ("k-delete-private", #"{"id":"k-delete-private","op":"delete","bucket":"hostile","key":"../private/alice/secret.txt"}"#),
                ("k-other-bucket", #"{"id":"k-other-bucket","op":"upload","bucket":"hostile","key":"../../private/alice/secret.txt","source":"\#(ok)"}"#),
                ("k-dot", #"{"id":"k-dot","op":"delete","bucket":"hostile","key":"./x/./y"}"#),
                ("k-empty-segment", #"{"id":"k-empty-segment","op":"delete","bucket":"hostile","key":"a//b"}"#),
                ("k-private-identity", #"{"id":"k-private-identity","op":"delete","bucket":"hostile","key":"secret.txt","accessLevel":"private","identityId":".."}"#),
                ("k-protected-target", #"{"id":"k-protected-target","op":"download","bucket":"hostile","key":"doc.txt","accessLevel":"protected","targetIdentityId":"../private/alice","destination":"\#(out.absoluteString)"}"#),
                ("k-copy-source", #"{"id":"k-copy-source","op":"copy","bucket":"hostile","key":"copied.txt","source":"s3://hostile/public/../private/alice/secret.txt"}"#),
                ("k-control", #"{"id":"k-control","op":"upload","bucket":"hostile","key":"a\u0007b","source":"\#(ok)"}"#),
            ]
            for (id, json) in escapes { try await env.kcat.produce(topic: "ferry.requests", key: "hostile/\(id)", value: json) }
            // Keys with everything else that is odd: stored exactly as given, under public/.
            let literal = ["a%2e%2e/b", "%2e%2e", "sp ace+plus&amp", "q?x#y", "uni/ü日本/𝄞", "back\\slash", "...", ".hidden/x",
                           "a..b/c", "~tilde/!*'()", "percent%25/%", "tab-less=x;y"]
            for (index, key) in literal.enumerated() {
                let json = #"{"id":"lit-\#(index)","op":"upload","bucket":"hostile","key":\#(HostileInput.jsonString(key)),"source":"\#(ok)"}"#
                try await env.kcat.produce(topic: "ferry.requests", key: "hostile/lit-\(index)", value: json)
            }
            _ = try await eventually(timeout: 120, every: 1) {
                let done = Set(try await env.statuses().filter { $0.state.isTerminal }.map(\.id))
                return done.count >= escapes.count + literal.count
            }
            let statuses = try await env.statuses().filter { $0.state.isTerminal }
            for (id, _) in escapes {
                let status = statuses.first { $0.id == id }
                #expect(status?.state == .rejected && status?.error?.code == "InvalidRequest", "\(id): \(String(describing: status))")
            }
            for index in literal.indices {
                let status = statuses.first { $0.id == "lit-\(index)" }
                #expect(status?.state == .completed, "\(literal[index]): \(String(describing: status?.error))\n\(worker.log.suffix(2000))")
                #expect(status?.object?.key == "public/" + literal[index])
            }
            #expect(worker.isRunning)
            #expect(!FileManager.default.fileExists(atPath: out.path))
            try await victimsUntouched(server, before)
            // What S3 holds is exactly the literal keys (and the victims), nothing at any other key.
            let stored = try await Self.everything(server)
            let written = Set((stored["hostile"] ?? [:]).keys).subtracting(before["hostile"]?.keys.map { $0 } ?? [])
            #expect(written == Set(literal.map { "public/" + $0 }))
            #expect(Set((stored["private"] ?? [:]).keys) == ["alice/secret.txt"])

            // `ferry cp` and `ferry presign` apply the same rule, before any request.
            let env2 = server.clientEnvironment
            for arguments in [["cp", ok.replacingOccurrences(of: "file://", with: ""), "s3://hostile/public/../private/alice/secret.txt",
                               "--s3-endpoint", server.endpoint],
                              ["presign", "get", "s3://hostile/public/../private/alice/secret.txt", "--s3-endpoint", server.endpoint],
                              ["cp", "s3://hostile/public/../", out.path, "--s3-endpoint", server.endpoint, "--recursive"]] {
                let result = try await runCommand(TestPaths.ferryBinary, arguments, environment: env2)
                #expect(result.status == 64, "\(arguments): \(result.stderr)")
                #expect(result.stderr.contains("'..' segment"), "\(result.stderr)")
            }
            try await victimsUntouched(server, before)
        }
    }

    /// Finding 4: a FIFO as a source is refused at once (it used to hold a slot for ever).
    @Test func aFIFOSourceIsRefusedAtOnce() async throws {
        try await withMoto("hostile-moto-fifo") { moto in try await withWorker(moto, extra: ["--max-transfers", "1"]) { env, worker in
            let fifo = env.dataRoot.appendingPathComponent("pipe")
            #expect(mkfifo(fifo.path, 0o644) == 0)
            let ok = env.dataRoot.appendingPathComponent("ok.txt").absoluteString
            try await env.kcat.produce(topic: "ferry.requests", key: "hostile/fifo", value: """
                {"id":"f-fifo","op":"upload","bucket":"hostile","key":"fifo.txt","source":"\(fifo.absoluteString)"}
                """)
            try await env.kcat.produce(topic: "ferry.requests", key: "hostile/fifo", value: """
                {"id":"f-dir","op":"upload","bucket":"hostile","key":"dir.txt","source":"file://\(env.dataRoot.path)"}
                """)
            try await env.kcat.produce(topic: "ferry.requests", key: "hostile/fifo", value: """
                {"id":"f-after","op":"upload","bucket":"hostile","key":"after.txt","source":"\(ok)"}
                """)
            // One slot: the request behind the FIFO completes only if the FIFO does not hold it.
            let after = try await env.terminalStatus(of: "f-after", timeout: 60)
            #expect(after?.state == .completed, "\(worker.log.suffix(2000))")
            let statuses = try await env.statuses()
            for id in ["f-fifo", "f-dir"] {
                let status = statuses.first { $0.id == id && $0.state.isTerminal }
                #expect(status?.error?.code == "InvalidPath", "\(id): \(String(describing: status))")
            }
        } }
    }

    /// Finding 5: a dead letter too large for the broker arrives cut to fit,
    /// saying what it was; and shutdown is bounded whatever Kafka does.
    @Test func oversizedDeadLettersFitAndShutdownIsBounded() async throws {
        try await withMoto("hostile-moto-dlq") { moto in try await withWorker(moto, extra: ["--shutdown-grace", "2"]) { env, worker in
            // Just under what the producer takes, with a key that breaks the key rule: refused,
            // and its DLQ headers would push it past the 1,000,000-byte message limit.
            let pad = String(repeating: "p", count: 998_000)
            let big = #"{"id":"d-big","op":"delete","bucket":"hostile","key":"../x","pad":"\#(pad)"}"#
            let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: env.cluster.bootstrapServers), logger: logger)
            try await producer.send(topic: "ferry.requests", key: "hostile/big", value: Array(big.utf8))
            try await env.kcat.produce(topic: "ferry.requests", key: "hostile/big", value: """
                {"id":"d-after","op":"delete","bucket":"hostile","key":"nothing.txt"}
                """)
            #expect(try await env.terminalStatus(of: "d-after", timeout: 60)?.state == .completed, "\(worker.log.suffix(2000))")
            var record: KafkaMessage?
            _ = try await eventually(timeout: 30) {
                record = try await KafkaConsumer.snapshot(topic: "ferry.requests.dlq",
                                                          configuration: KafkaConfiguration(bootstrapServers: env.cluster.bootstrapServers),
                                                          timeout: 10, logger: logger).first
                return record != nil
            }
            let letter = try #require(record, "no dead letter: \(worker.log.suffix(2000))")
            // Larger than a request may be, so refused unread (no id, no status).
            #expect(letter.header(DLQHeader.errorCode) == "RequestTooLarge")
            #expect(letter.header(DLQHeader.truncated) == "true")
            #expect(letter.header(DLQHeader.originalLength) == String(big.utf8.count))
            #expect(letter.header(DLQHeader.originalSHA256) == (try await sha256Hex(Array(big.utf8))))
            #expect(big.utf8.starts(with: letter.value))
            #expect(letter.value.count < big.utf8.count)

            // Kafka goes away entirely; SIGTERM still ends the worker within the grace plus the documented tail.
            env.cluster.setBroker(1, up: false)
            let started = Date()
            let status = await worker.stop(signal: SIGTERM, timeout: 2 + 30 + 15)
            let took = Date().timeIntervalSince(started)
            #expect(took < 2 + 30 + 10, "took \(took) s: \(worker.log.suffix(2000))")
            #expect(status != 137, "it had to be killed")
        } }
    }
}

/// Hex SHA-256 (sha256sum, a tool no one here wrote).
func sha256Hex(_ bytes: [UInt8]) async throws -> String {
    let out = try await runChecked("sha256sum", ["-"], input: Data(bytes))
    return out.split(separator: " ").first.map(String.init) ?? ""
}
