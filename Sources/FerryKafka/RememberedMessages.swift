import DequeModule
import Synchronization

/// The positions of the last `capacity` messages a consumer sent somewhere
/// for good (a dead-letter topic, a failure destination), oldest forgotten
/// first. Such a message's offset is committed after it was sent; a
/// rebalance can refuse that commit (a broker holds a group's commits until
/// every member has rejoined), and the partition then comes back to the same
/// consumer from before the message. Remembering it lets the consumer skip
/// sending it a second time.
public final class RememberedMessages: Sendable {
    private struct Position: Hashable {
        var partition: TopicPartition
        var offset: Int64
        init(_ message: KafkaMessage) {
            partition = TopicPartition(topic: message.topic, partition: message.partition)
            offset = message.offset
        }
    }

    public let capacity: Int
    private let remembered = Mutex<(order: Deque<Position>, set: Set<Position>)>(([], []))

    public init(capacity: Int) {
        precondition(capacity > 0, "RememberedMessages needs room for one message at least")
        self.capacity = capacity
    }

    public func remember(_ messages: some Sequence<KafkaMessage>) {
        remembered.withLock { remembered in
            for message in messages {
                let position = Position(message)
                guard remembered.set.insert(position).inserted else { continue }
                remembered.order.append(position)
            }
            while remembered.order.count > capacity { remembered.set.remove(remembered.order.removeFirst()) }
        }
    }

    public func remember(_ message: KafkaMessage) { remember(CollectionOfOne(message)) }

    public func contains(_ message: KafkaMessage) -> Bool { containsAll(CollectionOfOne(message)) }

    /// Whether every one of `messages` is remembered (`false` for none).
    public func containsAll(_ messages: some Collection<KafkaMessage>) -> Bool {
        guard !messages.isEmpty else { return false }
        return remembered.withLock { remembered in messages.allSatisfy { remembered.set.contains(Position($0)) } }
    }
}
