import FerryCore
import FerryEngine
import FerryKafka
import Foundation
import Logging

/// Reads `<prefix>.control` in a consumer group of its own (so every worker
/// sees every message, from the time it starts) and pauses, resumes or cancels
/// the named transfer if it runs here. Any other id is a logged no-op.
final class ControlListener: Sendable {
    private let consumer: KafkaConsumer
    private let engine: TransferEngine
    private let logger: Logger

    init(configuration: WorkerConfiguration, engine: TransferEngine, logger: Logger) throws(KafkaError) {
        var kafka = configuration.kafka
        kafka["group.id"] = "\(configuration.topics.prefix)-control-\(configuration.workerId)"
        kafka["auto.offset.reset"] = "latest"
        consumer = try KafkaConsumer(configuration: kafka, subscribing: [configuration.topics.control], logger: logger)
        self.engine = engine
        self.logger = logger
    }

    func run() async {
        await withTaskCancellationHandler {
            for await message in consumer {
                apply(message)
                try? await consumer.commit([TopicPartitionOffset(topic: message.topic, partition: message.partition,
                                                                 offset: message.offset + 1)])
            }
            await consumer.close()
        } onCancel: {
            consumer.stopFetching()
        }
    }

    func apply(_ message: KafkaMessage) {
        guard let command = try? JSONDecoder().decode(ControlMessage.self, from: Data(message.value)) else {
            logger.warning("ignoring undecodable control message",
                           metadata: ["partition": "\(message.partition)", "offset": "\(message.offset)"])
            return
        }
        guard let control = engine.control(for: command.id) else {
            logger.info("control \(command.action.rawValue) for \(command.id): not running on this worker (no-op)")
            return
        }
        let applied: Bool
        switch command.action {
        case .pause: applied = control.pause()
        case .resume: applied = control.resume()
        case .cancel: control.cancel(); applied = true
        }
        logger.info("control \(command.action.rawValue) \(applied ? "applied" : "ignored (state \(control.state.rawValue))")",
                    metadata: ["transfer": "\(command.id)"])
    }
}
