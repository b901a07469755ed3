import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// Generated hostile store notifications through a real ingest worker, both
/// ways they arrive (a store's Kafka target writing `ferry.ingest`, and
/// `POST /notifications/s3`), checked against invariants:
/// - the worker never exits;
/// - every message on `ferry.ingest` gets its outcome (its offset is committed:
///   published, or dropped with a logged reason), so no message holds a partition;
/// - every POST gets an answer that matches what the decoder makes of it
///   (200, 400 or 413; 403 when it names a bucket outside `--ingest-bucket`;
///   never a 5xx);
/// - valid notifications interleaved with the hostile ones are published.
///
/// `FERRY_FUZZ_SEED` replays a run; `FERRY_FUZZ_MESSAGES` sets its size (default 400).
@Suite(.serialized) struct HostileNotificationTests {
    let logger = Logger(label: "test.fuzz-notifications")

    @Test func hostileNotificationsOnMoto() async throws {
        let seed = FuzzReplay.seed, total = FuzzReplay.messages(default: 400)
        print("hostile notifications: seed \(seed), \(total) messages (replay with FERRY_FUZZ_SEED=\(seed) FERRY_FUZZ_MESSAGES=\(total))")
        let base = try TestPaths.temporaryDirectory("fuzz-notifications")
        try await MotoServer.start(logDirectory: base).stopAfter { moto in try await run(moto, base: base, seed: seed, total: total) }
        try? FileManager.default.removeItem(at: base)
    }

    /// A valid notification of a change no worker made: published after the settle window.
    static func valid(_ n: Int) -> String {
        let name = n % 2 == 0 ? "ObjectCreated:Put" : "ObjectRemoved:Delete"
        return #"{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"us-east-1","eventTime":"2026-01-02T03:04:05.678Z","eventName":"\#(name)","s3":{"bucket":{"name":"fuzz"},"object":{"key":"valid/n-\#(n).txt","size":3,"eTag":"e\#(n)","sequencer":"00\#(n)"}}}]}"#
    }

    func run(_ moto: MotoServer, base: URL, seed: UInt64, total: Int) async throws {
        // librdkafka's mock broker keeps at most 5 MiB per partition (older messages are
        // dropped): compressed batches and 8 partitions keep the large variants within it.
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
        for topic in Topics().all { try cluster.createTopic(topic, partitions: 8) }
        let kafka = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, ["compression.type": "lz4"])
        try await Boto3(moto)("create-bucket", "fuzz")
        let token = "fuzz-ingest-token-\(seed % 100_000)"
        let tokenFile = base.appendingPathComponent("ingest.token")
        try token.write(to: tokenFile, atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(at: base.appendingPathComponent("data"), withIntermediateDirectories: true)
        let worker = try WorkerCommandLine(
            bootstrapServers: cluster.bootstrapServers, storage: .s3(endpoint: moto.endpoint), dataRoot: base.appendingPathComponent("data"),
            stateDirectory: base.appendingPathComponent("state"), roles: "ingest",
            extra: ["--ingest-settle", "0.2", "--http-address", "127.0.0.1:0", "--ingest-token-file", tokenFile.path,
                    "--shutdown-grace", "5", "--kafka-property", "compression.type=lz4",
                    // The samples' buckets but photos: its notifications are refused.
                    "--ingest-bucket", "fuzz", "--ingest-bucket", "ingest", "--ingest-bucket", "images"])
            .start(name: "worker-ingest-fuzz", environment: moto.clientEnvironment, logDirectory: base)
        let http = try await worker.workerHTTPEndpoint()
        let up = await eventually(timeout: 60) { (try? await curl("\(http)/healthz").status) == 200 }
        try #require(up, "the worker did not start: \(worker.log.suffix(2000))")

        // Generate: one in six valid, the rest hostile variants of every store's shape.
        var rng = HostileInput.rng(seed: seed)
        var validKeys: [String] = []
        var messages: [(bytes: [UInt8], what: String)] = []
        for n in 0..<total {
            if Int.random(in: 0..<6, using: &rng) == 0 {
                validKeys.append("fuzz/valid/n-\(n).txt")
                messages.append((Array(Self.valid(n).utf8), "valid"))
            } else {
                let variant = HostileJSON.variant(of: NotificationSamples.all.randomElement(using: &rng)!, &rng)
                messages.append((variant.bytes, variant.description))
            }
        }

        // A version id written as 300,000 `\b` escapes: 600 kB here, 1.8 MB once the event writes
        // them as `\u0008`. Kafka refused that event, and the ingest role retried it forever,
        // holding its partition; the decoder now refuses fields longer than any store sends.
        let escapes = String(repeating: "\\b", count: 300_000)
        let fat = NotificationSamples.ceph
            .replacingOccurrences(of: #""versionId":"""#, with: #""versionId":"\#(escapes)""#)
            .replacingOccurrences(of: #"{"key":"x-amz-meta-ferry-transfer-id","val":"t1"}"#, with: "")  // not Ferry's write
            .replacingOccurrences(of: "dir/a b+c.txt", with: "escapes/version.txt").replacingOccurrences(of: "5d41402abc4b2a76b9719d911017c592", with: "e5")
        messages.insert((Array(fat.utf8), "version id of 300,000 escapes"), at: 1)

        // A store's Kafka target: everything that fits a Kafka message, straight onto ferry.ingest.
        let producer = try KafkaProducer(configuration: kafka, logger: logger)
        let direct = messages.filter { $0.bytes.count <= RequestLimits.maxMessageBytes }
        let results = await producer.sendAll(direct.map { OutgoingMessage(topic: "ferry.ingest", key: nil, value: $0.bytes) })
        #expect(results.allSatisfy { if case .success = $0 { true } else { false } }, "could not produce every message")

        // The endpoint: every fourth message posted; its answer must match the decoder's verdict.
        var answers: [Int: Int] = [:]
        let body = base.appendingPathComponent("body")
        for (index, message) in messages.enumerated() where index % 4 == 0 {
            try Data(message.bytes).write(to: body)
            let answer = try await curl("-X", "POST", "-H", "authorization: Bearer \(token)", "--data-binary", "@\(body.path)",
                                        "\(http)/notifications/s3")
            answers[answer.status, default: 0] += 1
            let expected: Int
            switch Result(catching: { () throws(FerryError) in try StoreNotificationDecoder.decode(message.bytes) }) {
            case .success(let changes): expected = changes.allSatisfy { ["fuzz", "ingest", "images"].contains($0.bucket) } ? 200 : 403
            case .failure(let error): expected = error.code == .requestTooLarge ? 413 : 400
            }
            #expect(answer.status == expected, "seed \(seed): message \(index) answered \(answer.status) \(answer.body.prefix(200)), expected \(expected): \(message.what.prefix(400))")
        }

        // Every message on ferry.ingest gets its outcome: the group commits up to the end.
        let observer = try KafkaConsumer.observer(bootstrapServers: cluster.bootstrapServers, group: "ferry-ingest", logger: logger)
        let ends = try await observer.endOffsets(of: "ferry.ingest")
        let partitions = ends.keys.sorted().map { TopicPartition(topic: "ferry.ingest", partition: $0) }
        var behind: [Int32: Int64] = [:]
        let settled = await eventually(timeout: 180) {
            guard let committed = try? await observer.committed(partitions) else { return false }
            // A partition that got no message has no commit (an invalid offset): nothing is behind there.
            behind = Dictionary(uniqueKeysWithValues: committed.map { ($0.partition, (ends[$0.partition] ?? 0) - max($0.offset, 0)) })
                .filter { $0.value != 0 }
            return behind.isEmpty
        }
        #expect(settled, "seed \(seed): messages without an outcome, by partition: \(behind)")
        #expect(worker.isRunning, "seed \(seed): the worker exited\n\(worker.log.suffix(4000))")
        #expect(!worker.log.contains("Fatal error"), "seed \(seed): a trap\n\(worker.log.suffix(4000))")

        // Valid notifications interleaved with the hostile ones were published.
        let events = try await KafkaConsumer.snapshot(topic: "ferry.events", configuration: kafka, timeout: 60, logger: logger)
        let announced = Set(events.compactMap { $0.key.map { String(decoding: $0, as: UTF8.self) } })
        let missing = validKeys.filter { !announced.contains($0) }
        #expect(missing.isEmpty, "seed \(seed): valid notifications not published: \(missing.prefix(5))")
        let dropped = worker.log.components(separatedBy: "dropping an undecodable notification").count - 1
        print("hostile notifications: seed \(seed): \(total) messages, \(validKeys.count) valid, \(direct.count) produced; "
              + "\(events.count) events published, \(dropped) dropped as undecodable (logged); POST answers \(answers.sorted { $0.key < $1.key }); "
              + "worker running: \(worker.isRunning); offsets behind the end: \(behind.values.reduce(0, +))")
        await observer.close()
        let stopped = await worker.stop()
        #expect(stopped == 0, "seed \(seed): exit \(stopped)")
    }
}
