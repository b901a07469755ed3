import FerryCore
import FerryKafka
import FerryStore
@testable import FerryWorker
import Foundation
import Logging
import Testing

/// A message Kafka refuses for good never holds up the outbox: a dead letter
/// is cut smaller until it fits, anything else is parked, and the messages
/// behind them are delivered. Against librdkafka's mock cluster, with the
/// producer's `message.max.bytes` lowered so its own size check refuses.
@Suite struct OutboxRefusalTests {
    @Test func refusedMessagesAreCutOrParkedAndTheRestIsDelivered() async throws {
        let logger = Logger(label: "test.outbox")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-outbox-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
        for topic in ["t.requests.dlq", "t.status"] { try cluster.createTopic(topic, partitions: 1) }
        let state = try WorkerStateStore(directory: directory)
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers,
                                                                           ["message.max.bytes": "20000"]), logger: logger)
        let letter = OutboxMessage(topic: "t.requests.dlq", key: Array("k".utf8), value: [UInt8](repeating: 0x61, count: 100_000),
                                   headers: [.init(DLQHeader.errorCode, "InvalidRequest")])
        let tooBigStatus = OutboxMessage(topic: "t.status", key: Array("s".utf8), value: [UInt8](repeating: 0x62, count: 50_000))
        let small = OutboxMessage(topic: "t.status", key: Array("ok".utf8), value: Array("{}".utf8))
        try await state.commitOutcome([letter, tooBigStatus, small])
        // The drainer believes the broker takes a million bytes: the refusal is what teaches it otherwise.
        let drainer = OutboxDrainer(state: state, producer: producer, deadLetterTopic: "t.requests.dlq", logger: logger)
        let left = await drainer.drain(within: 30)
        #expect(left == 0)
        #expect(try await state.parkedOutboxCount() == 1, "the status nobody can shrink is parked")
        let configuration = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
        let letters = try await KafkaConsumer.snapshot(topic: "t.requests.dlq", configuration: configuration, timeout: 20, logger: logger)
        let statuses = try await KafkaConsumer.snapshot(topic: "t.status", configuration: configuration, timeout: 20, logger: logger)
        #expect(letters.count == 1)
        #expect(letters.first.map { $0.value.count < 20_000 && $0.value.allSatisfy { $0 == 0x61 } } == true)
        #expect(letters.first?.header(DLQHeader.truncated) == "true")
        #expect(letters.first?.header(DLQHeader.originalLength) == "100000")
        #expect(statuses.map(\.keyString) == ["ok"], "the message behind them went through")
    }
}
