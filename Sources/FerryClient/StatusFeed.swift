import FerryCore
import FerryKafka
import Foundation

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

    public func makeAsyncIterator() -> Iterator { Iterator(consumer: consumer) }

    /// Ends the feed: the reader's wait for a next status returns nil.
    public func stop() { consumer.stopFetching() }

    public struct Iterator: AsyncIteratorProtocol {
        let consumer: KafkaConsumer
        private let decoder = JSONDecoder()

        init(consumer: KafkaConsumer) { self.consumer = consumer }

        /// The next status that decodes (anything else on the topic is
        /// skipped), or nil once the feed is stopped or the task cancelled.
        public mutating func next() async -> TransferStatus? {
            let consumer = self.consumer
            let decoder = self.decoder
            return await withTaskCancellationHandler {
                var messages = consumer.makeAsyncIterator()
                while !Task.isCancelled, let message = await messages.next() {
                    if let status = try? decoder.decode(TransferStatus.self, from: Data(message.value)) { return status }
                }
                return nil
            } onCancel: {
                consumer.stopFetching()
            }
        }
    }
}
