import CRdKafka
import Logging
import Synchronization

/// Notices messages a group never read because the broker deleted them first.
///
/// Each partition has an expected next offset: from its assignment, the
/// group's committed offset (or 0 for a group with none, where the cluster
/// deletes nothing by time: `KafkaConfiguration.unreadStartsAtZero`); after
/// that, the offset after the last message read. Consumption within a
/// partition is in offset order, so when a message comes past the expected
/// offset and the partition's log now starts past it too, the messages between
/// were deleted unread (retention shorter than the backlog; the embedded
/// cluster keeps 5 MiB per partition) and librdkafka's `auto.offset.reset`
/// skipped them without a word. That is logged once as an error with the
/// range and counted per partition. Gaps the log still covers (compaction,
/// transaction markers) are not losses. Used by the poll thread (the
/// rebalance callback runs there too), except the counts.
final class GapDetector: Sendable {
    private struct State {
        var next: [TopicPartition: Int64] = [:]
        /// Assigned with no committed offset on a cluster that deletes by time:
        /// where the first read lands is said, not counted.
        var fresh: Set<TopicPartition> = []
        var lost: [TopicPartition: Int64] = [:]
    }
    private let state = Mutex(State())
    private let logger: Logger
    private let group: String
    private let unreadStartsAtZero: Bool
    let lostTotal = Atomic<Int64>(0)

    init(group: String, unreadStartsAtZero: Bool, logger: Logger) {
        self.group = group
        self.unreadStartsAtZero = unreadStartsAtZero
        self.logger = logger
    }

    /// Messages lost so far, by partition.
    var lostByPartition: [TopicPartition: Int64] { state.withLock { $0.lost } }

    /// Partitions assigned to this member, with the group's committed offset
    /// of each (negative: none), or nil when that could not be asked: then a
    /// loss before the first message read cannot be told from retention.
    func assigned(_ partitions: [TopicPartition], committed: [TopicPartition: Int64]?) {
        guard let committed else {
            forget(partitions)
            if !partitions.isEmpty {
                logger.warning("kafka consumer (group \(group)): the committed offsets of \(partitions.map(\.description).joined(separator: ", ")) could not be read; messages deleted before this member's first read of them are not counted")
            }
            return
        }
        state.withLock { s in
            for p in partitions {
                let offset = committed[p] ?? -1
                if offset >= 0 {
                    s.next[p] = offset
                    s.fresh.remove(p)
                } else if unreadStartsAtZero {
                    s.next[p] = 0
                    s.fresh.remove(p)
                } else {
                    s.next[p] = nil
                    s.fresh.insert(p)
                }
            }
        }
    }

    /// Partitions that changed owner: another consumer may read on meanwhile.
    func forget(_ partitions: [TopicPartition]) {
        state.withLock { s in
            for p in partitions {
                s.next[p] = nil
                s.fresh.remove(p)
            }
        }
    }

    /// The partition is fetched again from `offset` (a hold): that is no gap.
    func rewind(_ partition: TopicPartition, to offset: Int64) {
        state.withLock { $0.next[partition] = offset }
    }

    func check(_ message: KafkaMessage, rk: OpaquePointer) {
        let key = TopicPartition(topic: message.topic, partition: message.partition)
        let (previous, fresh) = state.withLock { s in
            defer { s.next[key] = message.offset + 1 }
            return (s.next[key], s.fresh.remove(key) != nil)
        }
        if fresh, message.offset > 0 {
            logger.info("kafka consumer (group \(group)): \(key) has no committed offset; reading starts at \(message.offset), where the broker's log of it starts")
        }
        guard let expected = previous, message.offset > expected else { return }
        var low: Int64 = -1, high: Int64 = -1
        // A broker round trip, only when offsets jump.
        let err = rd_kafka_query_watermark_offsets(rk, message.topic, message.partition, &low, &high, 2_000)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            logger.warning("kafka consumer (group \(group)): \(key) jumped from offset \(expected) to \(message.offset), and the broker did not say where its log starts (\(KafkaError(err, context: "watermarks"))): the \(message.offset - expected) offsets between are not counted as lost")
            return
        }
        guard low > expected else { return }
        let end = min(low, message.offset)
        let missing = end - expected
        state.withLock { $0.lost[key, default: 0] += missing }
        lostTotal.add(missing, ordering: .relaxed)
        let why = unreadStartsAtZero
            ? "the embedded cluster (librdkafka's mock) keeps \(EmbeddedKafkaCluster.bytesKeptPerPartition >> 20) MiB per partition and drops the oldest messages beyond that; use more partitions, file:// sources, or a real Kafka for a backlog this large"
            : "the topic's retention is shorter than the group's backlog"
        logger.error("kafka consumer (group \(group)): \(missing) messages of \(key) (offsets \(expected)..<\(end)) were deleted by the broker before this group read them and will not be processed; the partition's log now starts at \(low). Why: \(why)")
    }
}
