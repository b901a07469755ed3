@testable import FerryKafka
import FerryTestSupport
import Logging
import Synchronization
import Testing

/// One property list (`--kafka-property`, `kafka.properties`) serves a
/// process's producers and consumers. librdkafka warned on every consumer of a
/// worker given `compression.type` (`… is a producer property and will be
/// ignored by this consumer instance`), and on every producer given a consumer
/// property: each kind now gets only the properties it reads, and nothing is
/// said about the rest. A property neither kind knows is still refused. The
/// recorder is the handle's own logger: what librdkafka logs while the handle
/// is created reaches it (it went to a `ferry.kafka` logger of its own).
@Suite struct SharedPropertiesTests {
    @Test func eachKindOfHandleGetsOnlyThePropertiesItReads() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: Logger(label: "test.kafka"))
        try cluster.createTopic("t.shared", partitions: 1)
        let shared = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, [
            "compression.type": "lz4", "linger.ms": "5", "acks": "all", "message.timeout.ms": "30000",
            "session.timeout.ms": "6000", "fetch.wait.max.ms": "100", "auto.offset.reset": "earliest", "max.poll.interval.ms": "60000",
            "client.id": "shared-properties",
        ])
        let recorded = RecordedLog()
        let logger = recorded.logger(label: "test.kafka.properties")
        let producer = try KafkaProducer(configuration: shared, logger: logger)
        try await producer.send(topic: "t.shared", key: Array("k".utf8), value: Array("v".utf8))
        var grouped = shared
        grouped["group.id"] = "shared"
        let consumer = try KafkaConsumer(configuration: grouped, subscribing: ["t.shared"], logger: logger)
        await consumer.close()
        await producer.flush()
        let warnings = recorded.lines.withLock { $0 }.filter { $0.contains("CONFWARN") || $0.contains("will be ignored") }
        #expect(warnings.isEmpty, "\(warnings)")

        // Still passed where they are read: a producer property's bad value stops the producer,
        // a consumer property's the consumer, and an unknown property either.
        #expect(throws: KafkaError.self) {
            try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, ["compression.type": "bogus"]),
                              logger: logger)
        }
        #expect(throws: KafkaError.self) {
            try KafkaConsumer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, ["session.timeout.ms": "-5", "group.id": "g"]),
                              subscribing: ["t.shared"], logger: logger)
        }
        #expect(throws: KafkaError.self) {
            try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, ["no.such.property": "1"]),
                              logger: logger)
        }
    }
}
