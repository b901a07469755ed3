import FerryCore
import FerryKafka
import FerryTestSupport
import JWTKit
import Foundation
import Logging
import Testing

/// One transfer end to end, as a user runs Ferry: a mock Kafka cluster, a real
/// S3 server, a `ferry worker` process; requests produced with kcat, objects
/// read back with boto3, the audit trigger's file checked.
@Suite(.serialized) struct EndToEndTests {
    let logger = Logger(label: "test.e2e")

    struct Environment {
        var cluster: EmbeddedKafkaCluster
        var kcat: Kcat
        var dataRoot: URL
        var logs: URL
        var server: any S3TestServer
        var bucket = "e2e"

        /// One in-process broker with Ferry's topics (2 partitions each) and a data root under `base`.
        static func oneBroker(base: URL, server: any S3TestServer, bucket: String, logger: Logger) throws -> Environment {
            let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
            for topic in Topics().all { try cluster.createTopic(topic, partitions: 2) }
            let dataRoot = base.appendingPathComponent("data")
            try FileManager.default.createDirectory(at: dataRoot, withIntermediateDirectories: true)
            return Environment(cluster: cluster, kcat: Kcat(bootstrapServers: cluster.bootstrapServers),
                               dataRoot: dataRoot, logs: base, server: server, bucket: bucket)
        }

        func startWorker(name: String, stateDir: String, extra: [String] = []) throws -> BackgroundProcess {
            try WorkerCommandLine(bootstrapServers: cluster.bootstrapServers, storage: .s3(endpoint: server.endpoint), dataRoot: dataRoot,
                                  stateDirectory: logs.appendingPathComponent(stateDir), triggerOutput: triggerOutput, logLevel: "debug", extra: extra)
                .start(name: name, environment: server.clientEnvironment, logDirectory: logs)
        }

        /// The trigger handlers' files, one directory for the environment's workers (a fleet's shared volume).
        var triggerOutput: URL { logs.appendingPathComponent("trigger-output") }

        func ferry(_ arguments: [String]) async throws -> String {
            try await runChecked(TestPaths.ferryBinary, arguments + ["--bootstrap-servers", cluster.bootstrapServers])
        }

        func statuses() async throws -> [TransferStatus] {
            try await kcat.consumeAll(topic: "ferry.status").compactMap {
                try? JSONDecoder().decode(TransferStatus.self, from: Data($0.value.utf8))
            }
        }

        func terminalStatus(of id: String, timeout: Double = 60) async throws -> TransferStatus? {
            var found: TransferStatus?
            _ = try await eventually(timeout: timeout, every: 0.5) {
                found = try await statuses().first { $0.id == id && $0.state.isTerminal }
                return found != nil
            }
            return found
        }

        func auditLines() -> [[String: Any]] {
            let file = triggerOutput.appendingPathComponent("audit/audit.jsonl")
            guard let text = try? String(contentsOf: file, encoding: .utf8) else { return [] }
            return text.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }
    }

    func withEnvironment(_ server: any S3TestServer, _ body: (Environment) async throws -> Void) async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 3, logger: logger)
        for topic in Topics().all { try cluster.createTopic(topic, partitions: 4) }
        let base = try TestPaths.temporaryDirectory("e2e-\(server.name)")
        let dataRoot = base.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: dataRoot, withIntermediateDirectories: true)
        let env = Environment(cluster: cluster, kcat: Kcat(bootstrapServers: cluster.bootstrapServers),
                              dataRoot: dataRoot, logs: base, server: server)
        try await Boto3(server)("create-bucket", env.bucket)
        try await body(env)
        try? FileManager.default.removeItem(at: base)
    }

    /// The walking skeleton's whole promise, against one server.
    func uploadTriggerDownload(_ env: Environment) async throws {
        let worker = try env.startWorker(name: "worker-1", stateDir: "state-1")
        // A source whose size is not a round number, with bytes that are not text.
        let bytes = Data((0..<(1_234_567)).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) })
        let source = env.dataRoot.appendingPathComponent("in/photo 1.bin")
        try FileManager.default.createDirectory(at: source.deletingLastPathComponent(), withIntermediateDirectories: true)
        try bytes.write(to: source)
        let userKey = "photos/photo 1.bin"
        let upload = """
            {"id":"up-1","op":"upload","bucket":"\(env.bucket)","key":"\(userKey)","source":"\(source.absoluteString)",
             "metadata":{"origin":"kcat"}}
            """
        try await env.kcat.produce(topic: "ferry.requests", key: "\(env.bucket)/\(userKey)", value: upload)

        let done = try await env.terminalStatus(of: "up-1")
        let status = try #require(done, "no terminal status; worker log:\n\(worker.log)")
        #expect(status.state == .completed, "\(status.error?.message ?? "")\n\(worker.log)")
        let objectKey = "public/\(userKey)"
        #expect(status.object?.key == objectKey)
        #expect(status.object?.size == Int64(bytes.count))

        // The lifecycle, in order, on ferry.status.
        let states = try await env.statuses().filter { $0.id == "up-1" }.map(\.state)
        #expect(states.first == .accepted)
        #expect(states.contains(.running))
        #expect(states.last == .completed)

        // boto3 reads back exactly the source's bytes, with Ferry's metadata and content type.
        let readBack = env.logs.appendingPathComponent("boto3-readback")
        let head = try await Boto3(env.server).get(bucket: env.bucket, key: objectKey, to: readBack)
        #expect(try Data(contentsOf: readBack) == bytes)
        #expect(head.ETag == status.object?.eTag)
        #expect(head.Metadata["origin"] == "kcat")
        #expect(head.ContentType == "application/octet-stream")

        // The S3 event on ferry.events, in AWS's shape, keyed bucket/key.
        let events = try await env.kcat.consumeAll(topic: "ferry.events")
        let eventRecord = try #require(events.first { $0.key == "\(env.bucket)/\(objectKey)" })
        let event = try JSONDecoder().decode(S3Event.self, from: Data(eventRecord.value.utf8))
        let record = try #require(event.records.first)
        #expect(record.eventName == "ObjectCreated:Put")
        #expect(record.eventSource == "aws:s3")
        #expect(record.s3.object.key == "public/photos/photo+1.bin")
        #expect("\"\(record.s3.object.eTag ?? "")\"" == head.ETag)

        // The audit trigger ran once for this object, with matching fields.
        let matching: () -> [[String: Any]] = { env.auditLines().filter { $0["key"] as? String == objectKey } }
        #expect(await eventually(timeout: 60) { !matching().isEmpty }, "trigger did not run; log:\n\(worker.log)")
        try await Task.sleep(for: .seconds(2))  // time for a duplicate to show up, if there were one
        let lines = matching()
        #expect(lines.count == 1)
        #expect(lines.first?["eventName"] as? String == "ObjectCreated:Put")
        #expect(lines.first?["bucket"] as? String == env.bucket)
        #expect((lines.first?["size"] as? NSNumber)?.int64Value == Int64(bytes.count))
        #expect("\"\(lines.first?["eTag"] as? String ?? "")\"" == head.ETag)

        // A download of that object reproduces the bytes.
        let target = env.dataRoot.appendingPathComponent("out/copy of photo.bin")
        let download = """
            {"id":"down-1","op":"download","bucket":"\(env.bucket)","key":"\(userKey)","destination":"\(target.absoluteString)"}
            """
        try await env.kcat.produce(topic: "ferry.requests", key: "\(env.bucket)/\(userKey)", value: download)
        let downloaded = try #require(try await env.terminalStatus(of: "down-1"))
        #expect(downloaded.state == .completed, "\(downloaded.error?.message ?? "")")
        #expect(try Data(contentsOf: target) == bytes)
        // No temp files left beside it.
        #expect(try FileManager.default.contentsOfDirectory(atPath: target.deletingLastPathComponent().path) == ["copy of photo.bin"])
        await worker.stop()
    }

    @Test func moto() async throws {
        let logs = try TestPaths.temporaryDirectory("moto-e2e")
        try await MotoServer.start(logDirectory: logs).stopAfter { server in
            try await withEnvironment(server) { env in
                try await uploadTriggerDownload(env)
                try await badInputIsDeadLetteredAndOffsetsCommitted(env)
                try await pauseResumeCancelThroughKafka(env)
                try await identityProofThroughKafka(env)
                try await gracefulShutdown(env)
            }
        }
    }

    @Test(.enabled(if: CephGateway.isInstalled || ProcessInfo.processInfo.environment["CI"] != nil))
    func cephGateway() async throws {
        try await CephGateway.start().stopAfter { server in
            try await withEnvironment(server) { env in try await uploadTriggerDownload(env) }
        }
    }

    /// An unparseable message and an unknown op: dead-lettered with the error
    /// headers, a `rejected` status for the known id, the worker goes on, and
    /// the offsets are committed (a restarted worker with fresh state does not
    /// see them again).
    func badInputIsDeadLetteredAndOffsetsCommitted(_ env: Environment) async throws {
        let worker = try env.startWorker(name: "worker-2", stateDir: "state-2")
        try await env.kcat.produce(topic: "ferry.requests", key: "e2e/x", value: "this is not json")
        try await env.kcat.produce(topic: "ferry.requests", key: "e2e/y",
                                   value: #"{"id":"bad-op","op":"explode","bucket":"e2e","key":"y"}"#)
        // Reading another identity's private object: refused before any byte moves.
        try await env.kcat.produce(topic: "ferry.requests", key: "e2e/z", value: """
            {"id":"peek","op":"download","bucket":"e2e","key":"z","accessLevel":"private","identityId":"bob",
             "targetIdentityId":"alice","destination":"\(env.dataRoot.appendingPathComponent("peek").absoluteString)"}
            """)
        let small = env.dataRoot.appendingPathComponent("in/small.txt")
        try Data("small\n".utf8).write(to: small)
        try await env.kcat.produce(topic: "ferry.requests", key: "e2e/small.txt", value: """
            {"id":"after-bad","op":"upload","bucket":"e2e","key":"small.txt","source":"\(small.absoluteString)"}
            """)

        let rejected = try await env.terminalStatus(of: "bad-op")
        #expect(rejected?.state == .rejected)
        #expect(rejected?.error?.code == "UnsupportedOperation")
        let denied = try await env.terminalStatus(of: "peek")
        #expect(denied?.state == .rejected)
        #expect(denied?.error?.code == "AccessDenied")
        #expect(!FileManager.default.fileExists(atPath: env.dataRoot.appendingPathComponent("peek").path))
        let after = try await env.terminalStatus(of: "after-bad")
        #expect(after?.state == .completed, "worker log:\n\(worker.log)")
        #expect(worker.isRunning)

        let dlq = try await env.kcat.consumeAll(topic: "ferry.requests.dlq")
        #expect(dlq.count == 3)
        #expect(dlq.contains { $0.headers.contains("ferry-error-code=AccessDenied") && $0.value.contains("\"peek\"") })
        let notJSON = try #require(dlq.first { $0.value == "this is not json" })
        #expect(notJSON.key == "e2e/x")
        #expect(notJSON.headers.contains("ferry-error-code=MalformedRequest"))
        #expect(notJSON.headers.contains("ferry-source-partition="))
        #expect(notJSON.headers.contains("ferry-source-offset="))
        #expect(dlq.contains { $0.headers.contains("ferry-error-code=UnsupportedOperation") && $0.value.contains("explode") })

        // SIGTERM: the worker commits and leaves. A new worker with empty state
        // must not process any of the old requests again.
        let status = await worker.stop(signal: SIGTERM, timeout: 30)
        #expect(status == 0, "worker exit \(status)\n\(worker.log)")
        let acceptedBefore = try await env.statuses().filter { $0.state == .accepted }.count
        let dlqBefore = dlq.count
        let fresh = try env.startWorker(name: "worker-3", stateDir: "state-3")
        try await env.kcat.produce(topic: "ferry.requests", key: "e2e/small.txt", value: """
            {"id":"canary","op":"upload","bucket":"e2e","key":"canary.txt","source":"\(small.absoluteString)"}
            """)
        #expect(try await env.terminalStatus(of: "canary")?.state == .completed, "worker log:\n\(fresh.log)")
        let acceptedAfter = try await env.statuses().filter { $0.state == .accepted }.count
        #expect(acceptedAfter == acceptedBefore + 1, "old requests were processed again")
        #expect(try await env.kcat.consumeAll(topic: "ferry.requests.dlq").count == dlqBefore)
        await fresh.stop()
    }

    /// `ferry pause|resume|cancel` reach the worker through ferry.control; the
    /// statuses say so; a cancelled multipart upload leaves nothing behind.
    func pauseResumeCancelThroughKafka(_ env: Environment) async throws {
        // 2 MiB/s: a 30 MiB upload takes about fifteen seconds, time to steer it
        // even when statuses and control messages lag by seconds under load.
        let worker = try env.startWorker(name: "worker-ctl", stateDir: "state-ctl",
                                         extra: ["--bandwidth-limit", "2MiB", "--part-size", "5MiB", "--part-concurrency", "1"])
        let bytes = Data((0..<(30 << 20)).map { UInt8(truncatingIfNeeded: $0 >> 7) })
        let source = env.dataRoot.appendingPathComponent("in/steer.bin")
        try bytes.write(to: source)
        func enqueue(_ id: String, key: String) async throws {
            try await env.kcat.produce(topic: "ferry.requests", key: "e2e/\(key)", value: """
                {"id":"\(id)","op":"upload","bucket":"e2e","key":"\(key)","source":"\(source.absoluteString)"}
                """)
        }
        func states(_ id: String) async throws -> [TransferStatus] { try await env.statuses().filter { $0.id == id } }

        let started = Date()
        try await enqueue("ctl-pause", key: "steer.bin")
        #expect(try await eventually(timeout: 60) { try await states("ctl-pause").contains { $0.state == .running && ($0.bytesTransferred ?? 0) > 0 } },
                "no progress; log:\n\(worker.log)")
        _ = try await env.ferry(["pause", "ctl-pause"])
        #expect(try await eventually(timeout: 30) { try await states("ctl-pause").contains { $0.state == .paused } })
        try await Task.sleep(for: .seconds(2))
        let whilePaused = try await states("ctl-pause")
        let pausedAt = try #require(whilePaused.lastIndex { $0.state == .paused })
        #expect(!whilePaused[(pausedAt + 1)...].contains { $0.state == .running }, "progress reported as running while paused")
        #expect(!whilePaused.contains { $0.state.isTerminal })
        _ = try await env.ferry(["resume", "ctl-pause"])
        let done = try await env.terminalStatus(of: "ctl-pause", timeout: 90)
        #expect(done?.state == .completed, "\(done?.error?.message ?? "")")
        // 30 MiB at 2 MiB/s cannot be faster than about fifteen seconds: the limit holds.
        let elapsed = Date().timeIntervalSince(started)
        #expect(elapsed >= 13.5)
        // Progress statuses come at most every 500 ms (plus the first, and one per pause/resume).
        let runningCount = try await states("ctl-pause").filter { $0.state == .running }.count
        #expect(runningCount <= Int(elapsed / 0.5) + 3, "\(runningCount) running statuses in \(elapsed) s")
        let readBack = env.logs.appendingPathComponent("steer.check")
        _ = try await Boto3(env.server).get(bucket: "e2e", key: "public/steer.bin", to: readBack)
        #expect(try Data(contentsOf: readBack) == bytes)

        try await enqueue("ctl-cancel", key: "cancelled.bin")
        #expect(try await eventually(timeout: 60) { try await states("ctl-cancel").contains { ($0.bytesTransferred ?? 0) > 6 << 20 } })
        _ = try await env.ferry(["cancel", "ctl-cancel"])
        let cancelled = try await env.terminalStatus(of: "ctl-cancel", timeout: 60)
        #expect(cancelled?.state == .cancelled)
        #expect(cancelled?.error?.code == "Cancelled")
        #expect(try await Boto3(env.server)("list-uploads", "e2e", "public/cancelled.bin").trimmingCharacters(in: .whitespacesAndNewlines) == "[]")

        _ = try await env.ferry(["pause", "no-such-transfer"])
        #expect(await eventually(timeout: 20) { worker.log.contains("no-such-transfer: not running on this worker; remembered") })
        #expect(worker.isRunning)
        await worker.stop()
    }

    struct TokenClaims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// A worker with `--auth-mode jwt`: a request with a valid token runs; one
    /// with a forged token is rejected with AccessDenied and dead-lettered.
    func identityProofThroughKafka(_ env: Environment) async throws {
        let secret = "e2e-secret-e2e-secret-e2e-secret"
        let secretFile = env.logs.appendingPathComponent("jwt.secret")
        try Data(secret.utf8).write(to: secretFile)
        let worker = try env.startWorker(name: "worker-jwt", stateDir: "state-jwt",
                                         extra: ["--auth-mode", "jwt", "--jwt-secret-file", secretFile.path])
        let claims = TokenClaims(sub: "alice", exp: .init(value: Date() + 600))
        let good = try await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256).sign(claims)
        let forged = try await JWTKeyCollection().add(hmac: HMACKey(from: "wrong-secret-wrong-secret-wrong!"), digestAlgorithm: .sha256)
            .sign(claims)
        // With tokens, the data root is laid out by access level: alice's file is in her private area.
        let source = env.dataRoot.appendingPathComponent("private/alice/small.txt")
        try FileManager.default.createDirectory(at: source.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("small file\n".utf8).write(to: source)
        for (id, token) in [("jwt-good", good), ("jwt-forged", forged)] {
            try await env.kcat.produce(topic: "ferry.requests", key: "e2e/\(id)", value: """
                {"id":"\(id)","op":"upload","bucket":"e2e","key":"\(id).txt","accessLevel":"private","identityId":"alice",
                 "source":"\(source.absoluteString)","auth":"\(token)"}
                """)
        }
        let accepted = try await env.terminalStatus(of: "jwt-good")
        #expect(accepted?.state == .completed, "\(accepted?.error?.message ?? "") \(worker.log)")
        #expect(accepted?.object?.key == "private/alice/jwt-good.txt")
        let refused = try await env.terminalStatus(of: "jwt-forged")
        #expect(refused?.state == .rejected)
        #expect(refused?.error?.code == "AccessDenied")
        // The token itself never appears in the worker's log.
        #expect(!worker.log.contains(forged) && !worker.log.contains(good))
        await worker.stop()
    }

    /// SIGTERM: a transfer in flight finishes within the grace period and the
    /// worker exits 0; with a grace too short, the transfer is stopped (its
    /// multipart upload aborted), left uncommitted, and the next worker does it.
    func gracefulShutdown(_ env: Environment) async throws {
        let source = env.dataRoot.appendingPathComponent("in/steer.bin")   // 30 MiB, from the control test
        func enqueue(_ id: String) async throws {
            try await env.kcat.produce(topic: "ferry.requests", key: "e2e/\(id)", value: """
                {"id":"\(id)","op":"upload","bucket":"e2e","key":"\(id).bin","source":"\(source.absoluteString)"}
                """)
        }
        func running(_ id: String) async throws -> Bool {
            try await env.statuses().contains { $0.id == id && ($0.bytesTransferred ?? 0) > 0 && $0.state == .running }
        }
        // 10 MiB/s: about three seconds for 30 MiB; a 30 s grace is plenty.
        let patient = try env.startWorker(name: "worker-grace", stateDir: "state-grace",
                                          extra: ["--bandwidth-limit", "10MiB", "--shutdown-grace", "30"])
        try await enqueue("grace-finish")
        #expect(try await eventually(timeout: 60) { try await running("grace-finish") })
        let stopped = Date()
        let status = await patient.stop(signal: SIGTERM, timeout: 40)
        #expect(status == 0, "exit \(status): \(patient.log)")
        #expect(Date().timeIntervalSince(stopped) < 30)
        #expect(try await env.terminalStatus(of: "grace-finish", timeout: 10)?.state == .completed)

        // 2 MiB/s: fifteen seconds of work against a one-second grace.
        let hasty = try env.startWorker(name: "worker-hasty", stateDir: "state-hasty",
                                        extra: ["--bandwidth-limit", "2MiB", "--shutdown-grace", "1"])
        try await enqueue("grace-cut")
        #expect(try await eventually(timeout: 60) { try await running("grace-cut") })
        let cutAt = Date()
        #expect(await hasty.stop(signal: SIGTERM, timeout: 30) == 0, "\(hasty.log)")
        #expect(Date().timeIntervalSince(cutAt) < 15)
        #expect(!(try await env.statuses().contains { $0.id == "grace-cut" && $0.state.isTerminal }))
        // Handed off, not aborted: a multipart upload holding parts stays for the
        // next worker (one holding none is aborted: nothing to save).
        let kept = try await Boto3(env.server)("list-uploads", "e2e", "public/grace-cut.bin").contains("public/grace-cut.bin")
        #expect(kept == hasty.log.contains("keeping multipart upload"), "\(hasty.log)")
        // Nothing lost: the next worker (another state dir) adopts the upload and completes it.
        let next = try env.startWorker(name: "worker-next", stateDir: "state-next")
        #expect(try await env.terminalStatus(of: "grace-cut", timeout: 90)?.state == .completed, "\(next.log)")
        #expect(next.log.contains("adopting the multipart upload") == kept, "\(next.log)")
        #expect(try await Boto3(env.server)("list-uploads", "e2e", "public/grace-cut.bin").trimmingCharacters(in: .whitespacesAndNewlines) == "[]")
        await next.stop()
    }
}
