import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// Generated hostile messages on the topics a worker reads besides requests
/// (`ferry.events` and `ferry.streams` for trigger dispatchers,
/// `ferry.callbacks` for callback delivery: workers write them, but so can
/// anyone with access to the broker), through a real worker, checked against
/// invariants:
/// - the worker never exits;
/// - every message gets its outcome: each consumer group (the S3 triggers',
///   each stream trigger's, callback delivery's) commits to the end of its
///   topic, so no message holds a partition (a failure record or dead letter
///   Kafka would not take was retried forever);
/// - every control message (`ferry.control`, read by every worker) is applied
///   or ignored with a log line;
/// - valid events interleaved with the hostile ones run the audit trigger.
///
/// `FERRY_FUZZ_SEED` replays a run; `FERRY_FUZZ_MESSAGES` sets its size (default 300 per topic).
@Suite(.serialized) struct HostileTriggerInputTests {
    let logger = Logger(label: "test.fuzz-triggers")

    static func event(key: String) -> String {
        #"{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"us-east-1","eventTime":"\#(Timestamp.iso8601(Date()))","eventName":"ObjectCreated:Put","userIdentity":{"principalId":"p"},"requestParameters":{"sourceIPAddress":"127.0.0.1"},"responseElements":{"x-amz-request-id":"r","x-amz-id-2":"i"},"s3":{"s3SchemaVersion":"1.0","configurationId":"c","bucket":{"name":"fuzz","ownerIdentity":{"principalId":"o"},"arn":"arn:aws:s3:::fuzz"},"object":{"key":"\#(key)","size":3,"eTag":"e","sequencer":"01"}}}]}"#
    }

    static let streamRecord = #"{"eventID":"c4ca4238a0b923820dcc509a6f75849b","eventName":"INSERT","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"us-east-1","dynamodb":{"ApproximateCreationDateTime":1428537600,"Keys":{"bucket":{"S":"fuzz"},"key":{"S":"public/incoming/a.jpg"}},"NewImage":{"bucket":{"S":"fuzz"},"key":{"S":"public/incoming/a.jpg"},"size":{"N":"3"},"owner":{"S":"alice"}},"SequenceNumber":"1000000000000000000070000","SizeBytes":40,"StreamViewType":"NEW_IMAGE"},"eventSourceARN":"arn:aws:dynamodb:us-east-1:000000000000:table/objects/stream/ferry"}"#

    @Test func hostileEventsAndStreamRecordsOnMoto() async throws {
        let seed = FuzzReplay.seed, total = FuzzReplay.messages(default: 300)
        print("hostile trigger input: seed \(seed), \(total) messages per topic (replay with FERRY_FUZZ_SEED=\(seed) FERRY_FUZZ_MESSAGES=\(total))")
        let base = try TestPaths.temporaryDirectory("fuzz-triggers")
        try await MotoServer.start(logDirectory: base).stopAfter { moto in try await run(moto, base: base, seed: seed, total: total) }
        try? FileManager.default.removeItem(at: base)
    }

    func run(_ moto: MotoServer, base: URL, seed: UInt64, total: Int) async throws {
        // librdkafka's mock broker keeps at most 5 MiB per partition (older messages are
        // dropped): compressed batches and 8 partitions keep the large variants within it.
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
        for topic in Topics().all { try cluster.createTopic(topic, partitions: 8) }
        let kafka = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, ["compression.type": "lz4"])
        try await Boto3(moto)("create-bucket", "fuzz")
        let dataRoot = base.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: dataRoot, withIntermediateDirectories: true)
        let worker = try WorkerCommandLine(
            bootstrapServers: cluster.bootstrapServers, storage: .s3(endpoint: moto.endpoint), dataRoot: dataRoot,
            stateDirectory: base.appendingPathComponent("state"), roles: "transfers,triggers",
            triggerOutput: base.appendingPathComponent("outputs"),
            extra: ["--shutdown-grace", "5", "--kafka-property", "compression.type=lz4"])
            .start(name: "worker-triggers-fuzz", environment: moto.clientEnvironment, logDirectory: base)

        var rng = HostileInput.rng(seed: seed)
        var validKeys: [String] = []
        var events: [OutgoingMessage] = []
        var records: [OutgoingMessage] = []
        for n in 0..<total {
            if Int.random(in: 0..<6, using: &rng) == 0 {
                validKeys.append("valid/n-\(n).txt")
                events.append(OutgoingMessage(topic: "ferry.events", key: Array("fuzz/valid/n-\(n).txt".utf8), value: Array(Self.event(key: "valid/n-\(n).txt").utf8)))
            } else {
                let variant = HostileJSON.variant(of: Self.event(key: "public/fz/\(n).txt"), &rng)
                events.append(OutgoingMessage(topic: "ferry.events", key: nil, value: variant.bytes))
            }
            let record = HostileJSON.variant(of: Self.streamRecord, &rng)
            // Keyed as workers key them (`objects/…`), so the object triggers take them, or not at all.
            records.append(OutgoingMessage(topic: "ferry.streams", key: Bool.random(using: &rng) ? Array("objects/fuzz/\(n)".utf8) : nil,
                                           value: record.bytes))
        }
        // 300,000 control bytes: a failure record writes each as `\u00XX`, six times the message.
        let controlBytes = (0..<300_000).map { _ in UInt8.random(in: 1...0x1F, using: &rng) }
        events.insert(OutgoingMessage(topic: "ferry.events", key: nil, value: controlBytes), at: 1)
        records.insert(OutgoingMessage(topic: "ferry.streams", key: Array("objects/fuzz/controls".utf8), value: controlBytes), at: 1)
        var all = (events + records).filter { $0.value.count <= RequestLimits.maxMessageBytes }
        // Callback deliveries that are not: garbled variants, and one just under Kafka's 1,000,000
        // bytes, which its dead letter's headers took past it.
        for _ in 0..<20 {
            let variant = HostileJSON.variant(of: #"{"url":"https://127.0.0.1:1/","status":{}}"#, &rng)
            if variant.bytes.count <= RequestLimits.maxMessageBytes { all.append(OutgoingMessage(topic: "ferry.callbacks", key: nil, value: variant.bytes)) }
        }
        // Control messages every worker reads: each is applied or ignored, with a log line.
        var controlMessages = 0
        for _ in 0..<40 {
            let variant = HostileJSON.variant(of: #"{"id":"fz-control","action":"pause"}"#, &rng)
            if variant.bytes.count <= RequestLimits.maxMessageBytes {
                all.append(OutgoingMessage(topic: "ferry.control", key: nil, value: variant.bytes)); controlMessages += 1
            }
        }
        let nearTheLimit = OutgoingMessage(topic: "ferry.callbacks", key: nil, value: Array(repeating: UInt8(ascii: "x"), count: 999_900))
        let producer = try KafkaProducer(configuration: kafka, logger: logger)
        let results = await producer.sendAll(all)
        #expect(results.allSatisfy { if case .success = $0 { true } else { false } }, "could not produce every message")
        // (Kafka's 1,000,000 counts a record's framing too: this one needs a producer allowed a little more.)
        var roomier = kafka
        roomier["message.max.bytes"] = "1100000"
        try await KafkaProducer(configuration: roomier, logger: logger).send(topic: nearTheLimit.topic, key: nearTheLimit.key, value: nearTheLimit.value)

        // Every message gets its outcome: each group commits to the end of its topic.
        var behind: [String: Int64] = [:]
        let settled = await eventually(timeout: 240) {
            behind = [:]
            for (group, topic) in [("ferry-triggers", "ferry.events"), ("ferry-triggers.object-index", "ferry.streams"),
                                   ("ferry-triggers.checksum-manifest", "ferry.streams"), ("ferry-triggers.post-feed", "ferry.streams"),
                                   ("ferry-callbacks", "ferry.callbacks")] {
                guard let observer = try? KafkaConsumer.observer(bootstrapServers: cluster.bootstrapServers, group: group, logger: logger) else { return false }
                defer { observer.close() }
                guard let ends = try? await observer.endOffsets(of: topic),
                      let committed = try? await observer.committed(ends.keys.map { TopicPartition(topic: topic, partition: $0) }) else { return false }
                // A partition that got no message has no commit (an invalid offset).
                let left = committed.reduce(Int64(0)) { $0 + (ends[$1.partition] ?? 0) - max($1.offset, 0) }
                if left != 0 { behind[group] = left }
            }
            return behind.isEmpty
        }
        #expect(settled, "seed \(seed): messages without an outcome, by consumer group: \(behind)\n\(worker.log.suffix(3000))")
        #expect(worker.isRunning, "seed \(seed): the worker exited\n\(worker.log.suffix(4000))")
        #expect(!worker.log.contains("Fatal error"), "seed \(seed): a trap\n\(worker.log.suffix(4000))")

        let controlLines = await eventually(timeout: 30) {
            worker.log.components(separatedBy: "ignoring undecodable control message").count - 1
                + worker.log.components(separatedBy: "ignoring control message: ").count - 1
                + worker.log.components(separatedBy: "not running on this worker").count - 1 == controlMessages
        }
        #expect(controlLines, "seed \(seed): not every one of \(controlMessages) control messages has its log line")

        // Valid events interleaved with the hostile ones ran the audit trigger.
        struct Audit: Decodable { var key: String }
        let audit = ((try? String(contentsOf: base.appendingPathComponent("outputs/audit/audit.jsonl"), encoding: .utf8)) ?? "")
            .split(separator: "\n").compactMap { try? JSONDecoder().decode(Audit.self, from: Data($0.utf8)) }
        let audited = Set(audit.map(\.key))
        let missing = validKeys.filter { !audited.contains($0) }
        #expect(missing.isEmpty, "seed \(seed): valid events the audit trigger did not see: \(missing.prefix(5))")
        let deadLetters = try await KafkaConsumer.snapshot(topic: "ferry.triggers.dlq", configuration: kafka, timeout: 60, logger: logger)
        // The callback near the limit is dead-lettered cut, and says so.
        let callbackLetters = try await KafkaConsumer.snapshot(topic: "ferry.callbacks.dlq", configuration: kafka, timeout: 60, logger: logger)
        #expect(callbackLetters.contains { $0.header(DLQHeader.truncated) == "true" && $0.header(DLQHeader.originalLength) == "999900" },
                "seed \(seed): no cut dead letter for the callback of 999,900 bytes")
        print("hostile trigger input: seed \(seed): \(events.count) events (\(validKeys.count) valid) and \(records.count) stream records; "
              + "\(audit.count) audit lines, \(deadLetters.count) failure records (largest \(deadLetters.map(\.value.count).max() ?? 0) bytes), "
              + "\(callbackLetters.count) callback dead letters; "
              + "worker running: \(worker.isRunning); messages behind: \(behind.values.reduce(0, +))")
        let stopped = await worker.stop()
        #expect(stopped == 0, "seed \(seed): exit \(stopped)")
    }
}
