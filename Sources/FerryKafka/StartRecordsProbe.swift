import Logging
import Synchronization

/// Whether the broker keeps what an offset commit's metadata says. The
/// crash-loop breakers count a message's starts there (`StartRecords`); a
/// broker that drops it (Tansu 0.6 answers every committed offset without its
/// metadata) leaves each worker counting only the starts it saw itself, so a
/// message that kills every worker that takes it is not stopped after
/// `--max-starts` deaths across the fleet. Commits that carry start records
/// are read back until one decides it, once per process: one that kept them,
/// or a second that lost them (one loss alone may be a commit of the same
/// offset that cleared them meanwhile, as a rebalance's can), which a warning
/// then names.
public final class StartRecordsProbe: Sendable {
    public static let shared = StartRecordsProbe()
    private let busy = Atomic<Bool>(false)
    private struct Verdict {
        /// Whether the broker keeps them: nil until decided.
        var kept: Bool?
        var losses = 0
    }
    private let verdict = Mutex(Verdict())

    public init() {}

    public var brokerKeepsStartRecords: Bool? { verdict.withLock { $0.kept } }

    /// After `offsets` were committed through `consumer`: reads back the
    /// first that carries start records, until the verdict is in. A failed
    /// read, or an offset that moved meanwhile, decides nothing.
    public func verify(_ offsets: [TopicPartitionOffset], consumer: KafkaConsumer, logger: Logger) async {
        guard verdict.withLock({ $0.kept == nil }),
              let sent = offsets.first(where: { $0.metadata?.hasPrefix(StartRecords.prefix) == true }),
              !busy.exchange(true, ordering: .acquiringAndReleasing) else { return }
        defer { busy.store(false, ordering: .releasing) }
        let partition = TopicPartition(topic: sent.topic, partition: sent.partition)
        guard let read = try? await consumer.committed([partition]).first, read.offset == sent.offset else { return }
        let keeps = read.metadata?.hasPrefix(StartRecords.prefix) == true
        let lost = verdict.withLock { v -> Bool in
            if keeps { v.kept = true; return false }
            v.losses += 1
            if v.losses >= 2 { v.kept = false }
            return v.kept == false
        }
        if lost {
            logger.warning("the broker does not keep offset commit metadata: \(partition) was committed at \(sent.offset) with start records and reads back without them. The crash-loop breaker then counts only the starts each worker saw itself: a message that kills every worker that takes it is not dead-lettered after --max-starts deaths across the fleet (Kafka keeps metadata up to offset.metadata.max.bytes; Tansu 0.6 drops it)")
        }
    }
}
