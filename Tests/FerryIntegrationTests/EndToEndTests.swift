import FerryCore
import FerryKafka
import FerryTestSupport
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

        func startWorker(name: String, stateDir: String) throws -> BackgroundProcess {
            try BackgroundProcess(
                name: name, executable: TestPaths.ferryBinary,
                arguments: ["worker", "--bootstrap-servers", cluster.bootstrapServers, "--s3-endpoint", server.endpoint,
                            "--region", "us-east-1", "--data-root", dataRoot.path,
                            "--state-dir", logs.appendingPathComponent(stateDir).path,
                            "--kafka-property", "session.timeout.ms=6000", "--log-level", "debug"],
                environment: server.clientEnvironment, logDirectory: logs)
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
            let file = dataRoot.appendingPathComponent("audit/audit.jsonl")
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
        let server = try await MotoServer.start(logDirectory: logs)
        do {
            try await withEnvironment(server) { env in
                try await uploadTriggerDownload(env)
                try await badInputIsDeadLetteredAndOffsetsCommitted(env)
            }
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    @Test(.enabled(if: CephGateway.isInstalled || ProcessInfo.processInfo.environment["CI"] != nil))
    func cephGateway() async throws {
        let server = try await CephGateway.start()
        do {
            try await withEnvironment(server) { env in try await uploadTriggerDownload(env) }
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
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
        let small = env.dataRoot.appendingPathComponent("in/small.txt")
        try Data("small\n".utf8).write(to: small)
        try await env.kcat.produce(topic: "ferry.requests", key: "e2e/small.txt", value: """
            {"id":"after-bad","op":"upload","bucket":"e2e","key":"small.txt","source":"\(small.absoluteString)"}
            """)

        let rejected = try await env.terminalStatus(of: "bad-op")
        #expect(rejected?.state == .rejected)
        #expect(rejected?.error?.code == "UnsupportedOperation")
        let after = try await env.terminalStatus(of: "after-bad")
        #expect(after?.state == .completed, "worker log:\n\(worker.log)")
        #expect(worker.isRunning)

        let dlq = try await env.kcat.consumeAll(topic: "ferry.requests.dlq")
        #expect(dlq.count == 2)
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
}
