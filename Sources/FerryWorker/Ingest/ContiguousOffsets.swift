import FerryKafka
import Synchronization

/// Offsets to commit when messages finish out of order. Messages of a
/// partition are begun in offset order, so everything begun below the
/// smallest unfinished offset is finished: that offset (or the one after the
/// highest begun, when none is unfinished) is the next to read. (The request
/// path keeps more, for the crash-loop breaker; this is for consumers whose
/// messages cannot crash a worker.)
final class ContiguousOffsets: Sendable {
    private struct Partition {
        var unfinished: Set<Int64> = []
        var highestBegun: Int64 = -1
        var committed: Int64 = -1
    }
    private let state = Mutex<[TopicPartition: Partition]>([:])

    func begin(_ message: KafkaMessage) {
        state.withLock { s in
            let key = TopicPartition(topic: message.topic, partition: message.partition)
            s[key, default: Partition()].unfinished.insert(message.offset)
            s[key]!.highestBegun = max(s[key]!.highestBegun, message.offset)
        }
    }

    func finish(_ message: KafkaMessage) {
        _ = state.withLock { s in s[TopicPartition(topic: message.topic, partition: message.partition)]?.unfinished.remove(message.offset) }
    }

    /// The next offset to read of each partition that moved since the last call.
    func take() -> [TopicPartitionOffset] {
        state.withLock { s in
            var result: [TopicPartitionOffset] = []
            for (key, p) in s {
                let next = p.unfinished.min() ?? p.highestBegun + 1
                guard next > p.committed else { continue }
                s[key]!.committed = next
                result.append(TopicPartitionOffset(topic: key.topic, partition: key.partition, offset: next))
            }
            return result
        }
    }
}
