@_exported import FerryCore
import FerryKafka
import Foundation
import Logging

/// A producer's view of Ferry: enqueue transfer requests and follow their statuses.
public final class TransferClient: Sendable {
    private let kafka: KafkaConfiguration
    private let topics: Topics
    private let producer: KafkaProducer
    private let logger: Logger

    public init(bootstrapServers: String, properties: [String: String] = [:], topics: Topics = Topics(),
                logger: Logger) throws(KafkaError) {
        kafka = KafkaConfiguration(bootstrapServers: bootstrapServers, properties)
        self.topics = topics
        self.logger = logger
        producer = try KafkaProducer(configuration: kafka, logger: logger)
    }

    /// Sends `request` to `<prefix>.requests` keyed by `bucket/key` and waits for Kafka's acknowledgement.
    public func enqueue(_ request: TransferRequest) async throws(KafkaError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding our own value type cannot fail.
        let value = Array(try! encoder.encode(request))
        try await producer.send(topic: topics.requests, key: request.kafkaKey, value: value)
    }

    /// Enqueues `request` and returns its statuses as they arrive, ending after
    /// the terminal one. Statuses are read from the end of `<prefix>.status` as
    /// it was before the request was sent, so none is missed.
    public func enqueueAndFollow(_ request: TransferRequest) async throws(KafkaError) -> AsyncStream<TransferStatus> {
        let consumer = try await KafkaConsumer.tailing(topic: topics.status, configuration: kafka, logger: logger)
        try await enqueue(request)
        return Self.statuses(of: request.id, from: consumer)
    }

    /// Follows the statuses of an already enqueued transfer, from now on.
    public func follow(id: String) async throws(KafkaError) -> AsyncStream<TransferStatus> {
        let consumer = try await KafkaConsumer.tailing(topic: topics.status, configuration: kafka, logger: logger)
        return Self.statuses(of: id, from: consumer)
    }

    private static func statuses(of id: String, from consumer: KafkaConsumer) -> AsyncStream<TransferStatus> {
        AsyncStream { continuation in
            let task = Task {
                let decoder = JSONDecoder()
                for await message in consumer where message.keyString == id {
                    guard let status = try? decoder.decode(TransferStatus.self, from: Data(message.value)) else { continue }
                    continuation.yield(status)
                    if status.state.isTerminal { break }
                }
                consumer.close()
                continuation.finish()
            }
            continuation.onTermination = { _ in
                task.cancel()
                consumer.stopFetching()
            }
        }
    }
}
