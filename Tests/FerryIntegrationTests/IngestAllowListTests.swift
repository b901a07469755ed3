import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// Ingest announces only what Ferry serves and the store confirms. A worker
/// with the ingest role, `--ingest-bucket served`, and a store that does not
/// answer (its endpoint is port 1 on loopback, where nothing listens):
/// - a notification naming another bucket is refused 403 with the reason,
///   counted as `foreign_bucket`, and nothing reaches any topic;
/// - one for the served bucket is taken (200), but its HEAD cannot be made:
///   after the retries it is on `ferry.ingest.dlq` with the reason, and no
///   event or stream record carries the notification's own fields.
@Suite struct IngestAllowListTests {
    let logger: Logger = {
        var logger = Logger(label: "test.ingest-allow")
        logger.logLevel = .critical
        return logger
    }()

    static func notification(bucket: String, key: String) -> String {
        #"{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"us-east-1","eventTime":"2026-01-02T03:04:05.678Z","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"\#(bucket)"},"object":{"key":"\#(key)","size":3,"eTag":"0123456789abcdef0123456789abcdef","sequencer":"0A"}}}]}"#
    }

    @Test func notificationsOfOtherBucketsAreRefusedAndUnconfirmedOnesDeadLettered() async throws {
        let base = try TestPaths.temporaryDirectory("ingest-allow")
        defer { try? FileManager.default.removeItem(at: base) }
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
        let topics = Topics()
        for topic in topics.all { try cluster.createTopic(topic, partitions: 1) }
        let token = "allow-list-token-0123456789"
        let tokenFile = base.appendingPathComponent("ingest.token")
        try token.write(to: tokenFile, atomically: true, encoding: .utf8)
        let data = base.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        let worker = try WorkerCommandLine(
            bootstrapServers: cluster.bootstrapServers, storage: .s3(endpoint: "http://127.0.0.1:1"), dataRoot: data,
            stateDirectory: base.appendingPathComponent("state"), roles: "ingest",
            extra: ["--ingest-settle", "0.2", "--http-address", "127.0.0.1:0", "--ingest-token-file", tokenFile.path, "--ingest-bucket", "served"])
            .start(name: "worker-ingest-allow", environment: ["AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"], logDirectory: base)
        let http = try await worker.workerHTTPEndpoint()
        let kafka = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
        func messages(_ topic: String) async throws -> [KafkaMessage] {
            try await KafkaConsumer.snapshot(topic: topic, configuration: kafka, timeout: 30, logger: logger)
        }

        let body = base.appendingPathComponent("body.json")
        try Data(Self.notification(bucket: "ferry-unknown-bucket-13", key: "hostile/ghost.txt").utf8).write(to: body)
        let refused = try await curl("-X", "POST", "-H", "authorization: Bearer \(token)", "--data-binary", "@\(body.path)",
                                     "\(http)/notifications/s3")
        #expect(refused.status == 403, "\(refused)")
        #expect(refused.body.contains("ferry-unknown-bucket-13") && refused.body.contains("--ingest-bucket"), "\(refused.body)")
        let metrics = try await curl("\(http)/metrics").body
        #expect(metrics.contains(#"ferry_ingest_notifications_total{outcome="foreign_bucket"} 1"#),
                "\(metrics.split(separator: "\n").filter { $0.contains("ingest") })")
        #expect(worker.log.contains("ferry-unknown-bucket-13"), "the refusal is not in the log")
        for topic in [topics.ingest, topics.events, topics.streams, topics.ingestDLQ] {
            #expect(try await messages(topic).isEmpty, "\(topic) holds a message for the refused notification")
        }

        try Data(Self.notification(bucket: "served", key: "unconfirmed.txt").utf8).write(to: body)
        let taken = try await curl("-X", "POST", "-H", "authorization: Bearer \(token)", "--data-binary", "@\(body.path)",
                                   "\(http)/notifications/s3")
        #expect(taken.status == 200, "\(taken)")
        var dead: [KafkaMessage] = []
        let arrived = await eventually(timeout: 90, every: 1) {
            dead = (try? await messages(topics.ingestDLQ)) ?? []
            return !dead.isEmpty
        }
        #expect(arrived, "nothing dead-lettered: \(worker.log.suffix(2000))")
        if let record = dead.first {
            #expect(String(decoding: record.value, as: UTF8.self).contains("unconfirmed.txt"))
            #expect(record.header(DLQHeader.errorMessage)?.contains("the store did not confirm ObjectCreated:Put of s3://served/unconfirmed.txt") == true,
                    "\(record.headers.map { "\($0.0): \(String(decoding: $0.1, as: UTF8.self))" })")
            #expect(record.header(DLQHeader.sourceTopic) == topics.ingest)
        }
        #expect(try await messages(topics.events).isEmpty, "an event was published for a change the store did not confirm")
        #expect(try await messages(topics.streams).isEmpty, "a stream record was published for a change the store did not confirm")
        #expect(await worker.stop() == 0)
    }
}
