import FerryKafka
import Synchronization

/// Knows which offsets of each owned partition are still being worked on, so
/// that only the contiguous finished prefix is ever committed: with many
/// requests in flight per partition, a crash never skips an unfinished one.
/// "Finished" means the outcome is in Kafka, not only in the local outbox: a
/// message stays held back until the outbox has delivered every row up to its
/// mark (`OutboxWatermark`), so a worker that never comes back with its state
/// directory leaves no committed request without its statuses and events.
/// It also holds each partition's start records (messages started without an
/// outcome yet), which every commit carries as metadata for the crash-loop
/// breaker. A partition is tracked from its assignment until it is revoked;
/// work on a partition this worker no longer owns is neither started nor committed.
final class OffsetTracker: Sendable {
    private struct Progress {
        /// Offsets in flight, with the transfer id each carries (when known).
        var inFlight: [Int64: String] = [:]
        /// Offsets whose outcome is in the outbox, with the outbox seq that
        /// must be delivered before it is in Kafka.
        var undelivered: [Int64: Int64] = [:]
        var highestFinished: Int64 = -1
        /// The first offset begun since the assignment: the consumer started
        /// there, so everything before it was committed already.
        var base: Int64?
        /// What the last successful commit said.
        var committed: Int64 = -1
        var committedMetadata: String?
        /// The lowest offset given up without an outcome: nothing at or past it is committed.
        var lowestAbandoned: Int64?
        /// Starts without an outcome, by offset (see `CrashLoopBreaker`).
        var starts: [Int64: Int] = [:]
        /// Whether the start records of earlier owners were read: until then
        /// nothing is committed, so their records are never overwritten unread.
        var seeded = false
        /// A rebalance is taking the partition: no work on it starts any more.
        var releasing = false
    }
    private let state = Mutex<[TopicPartition: Progress]>([:])
    private let watermark: OutboxWatermark

    init(watermark: OutboxWatermark) {
        self.watermark = watermark
    }

    /// Partitions are now this worker's.
    func assign(_ partitions: [TopicPartition]) {
        state.withLock { s in for p in partitions where s[p] == nil { s[p] = Progress() } }
    }

    /// Call when work on a message starts, in the order messages are consumed.
    /// False when the partition is not (or no longer) this worker's: leave the message alone.
    func begin(_ message: KafkaMessage) -> Bool {
        state.withLock { s in
            let key = message.topicPartition
            guard let progress = s[key], !progress.releasing else { return false }
            s[key]!.inFlight[message.offset] = ""
            if s[key]!.base == nil { s[key]!.base = message.offset }
            return true
        }
    }

    /// Names the transfer a message in flight carries (for hand-offs in a rebalance).
    func label(_ message: KafkaMessage, transferId: String?) {
        guard let transferId else { return }
        state.withLock { s in
            if s[message.topicPartition]?.inFlight[message.offset] != nil {
                s[message.topicPartition]!.inFlight[message.offset] = transferId
            }
        }
    }

    /// Whether the message's partition is still owned, and not being released
    /// (checked again just before work starts).
    func owns(_ message: KafkaMessage) -> Bool {
        state.withLock { $0[message.topicPartition].map { !$0.releasing } ?? false }
    }

    /// A rebalance takes `partitions`: from now on no work on them starts,
    /// while the work in flight goes on until it ends or is handed off. Without
    /// this, a message that got past its checks while the rebalance waited (a
    /// twin released by its hand-off, one that just got a slot) started a
    /// transfer no hand-off would reach, beside the partition's next owner.
    func stopStarting(_ partitions: Set<TopicPartition>) {
        state.withLock { s in for p in partitions { s[p]?.releasing = true } }
    }

    /// Call when a message's outcome is durable (committed to the outbox): it
    /// is committed once the outbox has delivered it.
    func finish(_ message: KafkaMessage) {
        state.withLock { s in
            let key = message.topicPartition
            guard var progress = s[key], progress.inFlight.removeValue(forKey: message.offset) != nil else { return }
            progress.undelivered[message.offset] = watermark.mark()
            progress.highestFinished = max(progress.highestFinished, message.offset)
            progress.starts[message.offset] = nil
            s[key] = progress
        }
    }

    /// Call when a message was begun but has no outcome (handed off, or the
    /// worker is stopping): it stays uncommitted, and so does everything after
    /// it in its partition, until the partition is assigned afresh. Giving a
    /// message back is not a crash: its start record goes.
    func abandon(_ message: KafkaMessage) {
        state.withLock { s in
            let key = message.topicPartition
            guard var progress = s[key], progress.inFlight.removeValue(forKey: message.offset) != nil else { return }
            progress.lowestAbandoned = min(progress.lowestAbandoned ?? message.offset, message.offset)
            progress.starts[message.offset] = nil
            s[key] = progress
        }
    }

    // MARK: Start records

    /// Merges start records read from Kafka and the local journal (the larger count wins).
    func seedStarts(_ starts: [Int64: Int], for partition: TopicPartition) {
        state.withLock { s in
            guard s[partition] != nil else { return }
            for (offset, count) in starts { s[partition]!.starts[offset] = max(s[partition]!.starts[offset] ?? 0, count) }
            s[partition]!.seeded = true
        }
    }

    /// Starts recorded for the message so far (nil when its partition is not owned).
    func starts(of message: KafkaMessage) -> Int? {
        state.withLock { s in s[message.topicPartition].map { $0.starts[message.offset] ?? 0 } }
    }

    /// Counts one more start of the message and returns the new count (nil when not owned).
    func recordStart(of message: KafkaMessage) -> Int? {
        state.withLock { s in
            guard s[message.topicPartition] != nil else { return nil }
            let count = (s[message.topicPartition]!.starts[message.offset] ?? 0) + 1
            s[message.topicPartition]!.starts[message.offset] = count
            return count
        }
    }

    // MARK: Hand-offs

    /// Transfer ids in flight on `partitions`.
    func transfersInFlight(on partitions: Set<TopicPartition>) -> [String] {
        state.withLock { s in partitions.flatMap { s[$0]?.inFlight.values.filter { !$0.isEmpty } ?? [] } }
    }

    func inFlightCount(on partitions: Set<TopicPartition>) -> Int {
        state.withLock { s in partitions.reduce(0) { $0 + (s[$1]?.inFlight.count ?? 0) } }
    }

    /// The outbox seq to wait for before `partitions`' finished messages are
    /// all in Kafka; nil when none is waiting.
    func deliveryMark(on partitions: Set<TopicPartition>) -> Int64? {
        let mark = state.withLock { s in partitions.compactMap { s[$0]?.undelivered.values.max() }.max() }
        return mark.flatMap { watermark.isSettled($0) ? nil : $0 }
    }

    // MARK: Commits

    /// Stops tracking `partitions` and returns what to commit for them (their
    /// finished prefix and start records), so nothing is lost when they go.
    func revoke(_ partitions: Set<TopicPartition>) -> [TopicPartitionOffset] {
        state.withLock { s in
            var result: [TopicPartitionOffset] = []
            for p in partitions {
                guard var progress = s.removeValue(forKey: p), progress.seeded else { continue }
                forgetDelivered(&progress)
                guard let next = Self.committable(progress) else { continue }
                result.append(TopicPartitionOffset(topic: p.topic, partition: p.partition, offset: next,
                                                   metadata: Self.metadata(progress, from: next)))
            }
            return result
        }
    }

    /// What to commit now (the next offset to read per partition, with its
    /// start records), for partitions where either changed since the last commit.
    func takeCommits() -> [TopicPartitionOffset] {
        state.withLock { s in
            var result: [TopicPartitionOffset] = []
            for (key, var progress) in s where progress.seeded {
                if forgetDelivered(&progress) { s[key] = progress }
                guard let next = Self.committable(progress) else { continue }
                let metadata = Self.metadata(progress, from: next)
                guard next != progress.committed || metadata != progress.committedMetadata else { continue }
                progress.committed = next
                progress.committedMetadata = metadata
                s[key] = progress
                result.append(TopicPartitionOffset(topic: key.topic, partition: key.partition, offset: next, metadata: metadata))
            }
            return result
        }
    }

    /// Forgets what a failed commit said, so the next round sends it again.
    func commitFailed(_ offsets: [TopicPartitionOffset]) {
        state.withLock { s in
            for o in offsets where s[o.topicPartition]?.committed == o.offset {
                s[o.topicPartition]!.committed = -1
                s[o.topicPartition]!.committedMetadata = nil
            }
        }
    }

    /// Drops the held-back messages whose outcomes are now in Kafka; true when any went.
    @discardableResult
    private func forgetDelivered(_ progress: inout Progress) -> Bool {
        let settled = watermark.settledThrough
        guard progress.undelivered.values.contains(where: { $0 <= settled }) else { return false }
        progress.undelivered = progress.undelivered.filter { $0.value > settled }
        return true
    }

    /// The next offset to read: below every message in flight, given back or
    /// not yet delivered, and past everything finished. Nil before the first
    /// message is begun.
    private static func committable(_ progress: Progress) -> Int64? {
        guard let base = progress.base else { return nil }
        return min(progress.inFlight.keys.min() ?? .max, progress.undelivered.keys.min() ?? .max,
                   progress.lowestAbandoned ?? .max, max(progress.highestFinished + 1, base))
    }

    /// Start records at or past `next` (earlier ones are finished and committed).
    private static func metadata(_ progress: Progress, from next: Int64) -> String? {
        StartRecords.encode(progress.starts.filter { $0.key >= next })
    }
}

extension KafkaMessage {
    var topicPartition: TopicPartition { TopicPartition(topic: topic, partition: partition) }
}
