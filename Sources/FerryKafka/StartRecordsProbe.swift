import Logging
import Synchronization

/// Whether the broker keeps what an offset commit's metadata says. The
/// crash-loop breakers count a message's starts there (`StartRecords`); a
/// broker that drops it (Tansu 0.6 answers every committed offset without its
/// metadata) leaves each worker counting only the starts it saw itself, so a
/// message that kills every worker that takes it is not stopped after
/// `--max-starts` deaths across the fleet. The first commit that carries start
/// records is read back, once per process, and a warning says when they were lost.
public final class StartRecordsProbe: Sendable {
    public static let shared = StartRecordsProbe()
    private let done = Atomic<Bool>(false)
    /// Whether the broker kept them: nil until a read-back decided it.
    private let kept = Mutex<Bool?>(nil)

    public init() {}

    public var brokerKeepsStartRecords: Bool? { kept.withLock { $0 } }

    /// After `offsets` were committed through `consumer`, with nothing else
    /// committed for them since: reads back the first that carries start
    /// records, unless one was read back already. Undecided (a failed read,
    /// an offset moved meanwhile) leaves the next commit to try again.
    public func verify(_ offsets: [TopicPartitionOffset], consumer: KafkaConsumer, logger: Logger) async {
        guard let sent = offsets.first(where: { $0.metadata?.hasPrefix(StartRecords.prefix) == true }),
              !done.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let partition = TopicPartition(topic: sent.topic, partition: sent.partition)
        guard let read = try? await consumer.committed([partition]).first, read.offset == sent.offset else {
            done.store(false, ordering: .releasing)
            return
        }
        let keeps = read.metadata?.hasPrefix(StartRecords.prefix) == true
        kept.withLock { $0 = keeps }
        if !keeps {
            logger.warning("the broker does not keep offset commit metadata: \(partition) was committed at \(sent.offset) with start records and reads back without them. The crash-loop breaker then counts only the starts each worker saw itself: a message that kills every worker that takes it is not dead-lettered after --max-starts deaths across the fleet (Kafka keeps metadata up to offset.metadata.max.bytes; Tansu 0.6 drops it)")
        }
    }
}
