import FerryCore
import FerryKafka
import Foundation
import Logging

/// Statuses decoded from a status-topic consumer as the reader takes them.
///
/// Nothing is queued between the consumer and the reader: when the reader
/// falls behind (a pipe nobody drains, a terminal on hold) the consumer's
/// bounded buffer fills and pauses fetching, so memory stays bounded however
/// busy the fleet. (An unbounded stream in between kept reading the topic into
/// memory for as long as the reader was stuck.)
public struct StatusFeed: AsyncSequence, Sendable {
    public typealias Element = TransferStatus
    let consumer: KafkaConsumer
    /// Where a message that is not a status is reported (it is skipped).
    let logger: Logger

    public func makeAsyncIterator() -> Iterator { Iterator(consumer: consumer, logger: logger) }

    /// Ends the feed: the reader's wait for a next status returns nil.
    public func stop() { consumer.stopFetching() }

    public struct Iterator: AsyncIteratorProtocol {
        let consumer: KafkaConsumer
        let logger: Logger
        private let decoder = JSONDecoder()

        init(consumer: KafkaConsumer, logger: Logger) {
            self.consumer = consumer
            self.logger = logger
        }

        /// The next status that decodes (anything else on the topic is
        /// skipped with a warning that says where and why), or nil once the
        /// feed is stopped or the task cancelled.
        public mutating func next() async -> TransferStatus? {
            let consumer = self.consumer
            let decoder = self.decoder
            let logger = self.logger
            return await withTaskCancellationHandler {
                var messages = consumer.makeAsyncIterator()
                while !Task.isCancelled, let message = await messages.next() {
                    do {
                        return try decoder.decode(TransferStatus.self, from: Data(message.value))
                    } catch {
                        logger.warning("skipped a message that is not a status: \(message.topic)[\(message.partition)] at offset \(message.offset): \(DecodingProblem.describe(error))")
                    }
                }
                return nil
            } onCancel: {
                consumer.stopFetching()
            }
        }
    }
}
