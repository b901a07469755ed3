import FerryKafka
import Synchronization

/// Knows which offsets of each owned partition are still being worked on, so
/// that only the contiguous finished prefix is ever committed: with many
/// requests in flight per partition, a crash never skips an unfinished one.
/// A partition is tracked from its assignment until it is revoked; work on a
/// partition this worker no longer owns is neither started nor committed.
final class OffsetTracker: Sendable {
    private struct Progress {
        /// Offsets in flight, with the transfer id each carries (when known).
        var inFlight: [Int64: String] = [:]
        var highestFinished: Int64 = -1
        var committed: Int64 = -1
        /// The lowest offset given up without an outcome: nothing at or past it is committed.
        var lowestAbandoned: Int64?
    }
    private let state = Mutex<[TopicPartition: Progress]>([:])

    /// Partitions are now this worker's.
    func assign(_ partitions: [TopicPartition]) {
        state.withLock { s in for p in partitions where s[p] == nil { s[p] = Progress() } }
    }

    /// Call when work on a message starts, in the order messages are consumed.
    /// False when the partition is not (or no longer) this worker's: leave the message alone.
    func begin(_ message: KafkaMessage, transferId: String?) -> Bool {
        state.withLock { s in
            let key = TopicPartition(topic: message.topic, partition: message.partition)
            guard s[key] != nil else { return false }
            s[key]!.inFlight[message.offset] = transferId ?? ""
            return true
        }
    }

    /// Whether the message's partition is still owned (checked again just before work starts).
    func owns(_ message: KafkaMessage) -> Bool {
        state.withLock { $0[TopicPartition(topic: message.topic, partition: message.partition)] != nil }
    }

    /// Call when a message's outcome is durable (in the outbox).
    func finish(_ message: KafkaMessage) {
        state.withLock { s in
            let key = TopicPartition(topic: message.topic, partition: message.partition)
            guard var progress = s[key], progress.inFlight.removeValue(forKey: message.offset) != nil else { return }
            progress.highestFinished = max(progress.highestFinished, message.offset)
            s[key] = progress
        }
    }

    /// Call when a message was begun but has no outcome (handed off, or the
    /// worker is stopping): it stays uncommitted, and so does everything after
    /// it in its partition, until the partition is assigned afresh.
    func abandon(_ message: KafkaMessage) {
        state.withLock { s in
            let key = TopicPartition(topic: message.topic, partition: message.partition)
            guard var progress = s[key], progress.inFlight.removeValue(forKey: message.offset) != nil else { return }
            progress.lowestAbandoned = min(progress.lowestAbandoned ?? message.offset, message.offset)
            s[key] = progress
        }
    }

    /// Transfer ids in flight on `partitions`.
    func transfersInFlight(on partitions: Set<TopicPartition>) -> [String] {
        state.withLock { s in partitions.flatMap { s[$0]?.inFlight.values.filter { !$0.isEmpty } ?? [] } }
    }

    func inFlightCount(on partitions: Set<TopicPartition>) -> Int {
        state.withLock { s in partitions.reduce(0) { $0 + (s[$1]?.inFlight.count ?? 0) } }
    }

    /// Stops tracking `partitions` and returns the offsets to commit for them
    /// (their finished prefix), so nothing finished is lost when they go.
    func revoke(_ partitions: Set<TopicPartition>) -> [TopicPartitionOffset] {
        state.withLock { s in
            var result: [TopicPartitionOffset] = []
            for p in partitions {
                guard let progress = s.removeValue(forKey: p) else { continue }
                let next = Self.committable(progress)
                if next > 0 { result.append(TopicPartitionOffset(topic: p.topic, partition: p.partition, offset: next)) }
            }
            return result
        }
    }

    /// Offsets to commit now (the next offset to read per partition), for
    /// partitions whose committable point moved since the last call.
    func takeCommittable() -> [TopicPartitionOffset] {
        state.withLock { s in
            var result: [TopicPartitionOffset] = []
            for (key, var progress) in s {
                let next = Self.committable(progress)
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
                let key = TopicPartition(topic: o.topic, partition: o.partition)
                if s[key]?.committed == o.offset { s[key]?.committed = o.offset - 1 }
            }
        }
    }

    private static func committable(_ progress: Progress) -> Int64 {
        min(progress.inFlight.keys.min() ?? .max, progress.lowestAbandoned ?? .max, progress.highestFinished + 1)
    }
}
