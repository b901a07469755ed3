import FerryKafka
import Synchronization

/// Knows which offsets of each partition are still being worked on, so that
/// only the contiguous finished prefix is ever committed: with many requests
/// in flight per partition, a crash never skips an unfinished one.
final class OffsetTracker: Sendable {
    private struct Partition: Hashable {
        var topic: String
        var partition: Int32
    }
    private struct Progress {
        var inFlight: Set<Int64> = []
        var highestFinished: Int64 = -1
        var committed: Int64 = -1
    }
    private let state = Mutex<[Partition: Progress]>([:])

    /// Call when work on a message starts, in the order messages are consumed.
    func begin(_ message: KafkaMessage) {
        state.withLock { s in
            _ = s[Partition(topic: message.topic, partition: message.partition), default: Progress()].inFlight.insert(message.offset)
        }
    }

    /// Call when a message's outcome is durable.
    func finish(_ message: KafkaMessage) {
        state.withLock { s in
            let key = Partition(topic: message.topic, partition: message.partition)
            guard var progress = s[key] else { return }
            progress.inFlight.remove(message.offset)
            progress.highestFinished = max(progress.highestFinished, message.offset)
            s[key] = progress
        }
    }

    /// Offsets to commit now (the next offset to read per partition), for
    /// partitions whose committable point moved since the last call.
    func takeCommittable() -> [TopicPartitionOffset] {
        state.withLock { s in
            var result: [TopicPartitionOffset] = []
            for (key, var progress) in s {
                let next = progress.inFlight.min() ?? (progress.highestFinished + 1)
                if next > progress.committed && next > 0 {
                    progress.committed = next
                    s[key] = progress
                    result.append(TopicPartitionOffset(topic: key.topic, partition: key.partition, offset: next))
                }
            }
            return result
        }
    }

    /// Puts offsets back when their commit failed, so the next round tries again.
    func commitFailed(_ offsets: [TopicPartitionOffset]) {
        state.withLock { s in
            for o in offsets {
                let key = Partition(topic: o.topic, partition: o.partition)
                if s[key]?.committed == o.offset { s[key]?.committed = o.offset - 1 }
            }
        }
    }
}
