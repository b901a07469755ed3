import FerryCore
import FerryKafka
import FerryStore
import Logging
import Synchronization
import FerryConcurrency

/// Keeps a message that kills its worker from stopping its partition for good.
///
/// Before a message runs, its start is recorded durably in two places: the
/// worker's SQLite state and the metadata of the group's committed offset for
/// its partition (a synchronous commit, shared by the messages starting at the
/// same moment). A start record is removed when the message has an outcome or
/// is given back in a shutdown or rebalance, so a record that is still there
/// when the message is taken again means a worker died while it ran.
///
/// - Taken again with records (a *suspect*): it runs alone in the worker
///   (`IsolationGate`), so that a further death is counted against it only.
/// - Taken with `maxStarts` records: it is not run; it is dead-lettered as
///   `PoisonMessage` with its original bytes, and its offset is committed.
/// - Taken with more (the quarantine itself died): the dead letter carries
///   only the value's length and SHA-256, with no parsing of any kind.
///
/// Any worker that takes the partition reads the records from the committed
/// offset's metadata, so the count holds across SIGKILL, restarts with a new
/// state directory, and rebalances to workers that never saw the crash. When
/// Kafka cannot take the commit (no coordinator, a rebalance), the local record
/// still counts on this worker, and the next successful commit carries it.
final class CrashLoopBreaker: Sendable {
    enum Admission: Equatable, Sendable {
        /// Run it; alone when it is a suspect.
        case run(isolated: Bool)
        /// Dead-letter it as `PoisonMessage`; `withheld` when even that failed before.
        case quarantine(starts: Int, withheld: Bool)
        /// The partition is no longer this worker's: leave the message alone.
        case notOwned
        /// This worker dead-lettered it already, and the partition came back
        /// before that was committed: settle it without a second dead letter.
        case deadLetteredAlready
    }

    let maxStarts: Int
    /// How long a start waits for Kafka to take its record: a commit takes
    /// milliseconds, except in a rebalance, which holds commits until every
    /// member has rejoined; then the start runs with its local record.
    static let kafkaWait: Duration = .seconds(5)
    private let tracker: OffsetTracker
    private let committer: OffsetCommitter
    private let consumer: KafkaConsumer
    private let state: WorkerStateStore
    private let logger: Logger
    private let seeding = Mutex<[TopicPartition: Task<Void, Never>]>([:])
    private let unrecordedWarnings = WarningThrottle()
    /// Messages this worker dead-lettered: their offset is committed once
    /// the outbox delivered them, and a rebalance that refuses that commit
    /// brings them back here with the same start records.
    private let deadLettered = RememberedMessages(capacity: 1024)

    init(maxStarts: Int, tracker: OffsetTracker, committer: OffsetCommitter, consumer: KafkaConsumer,
         state: WorkerStateStore, logger: Logger) {
        self.maxStarts = maxStarts
        self.tracker = tracker
        self.committer = committer
        self.consumer = consumer
        self.state = state
        self.logger = logger
    }

    /// Decides what to do with `message` from the starts recorded for it so
    /// far (reading its partition's records first, once per assignment).
    /// The caller then takes the `IsolationGate` (alone unless `.run(isolated: false)`)
    /// and calls `recordStart` before doing anything with the message: a start
    /// recorded while waiting for the gate would count a death that was not its own.
    func assess(_ message: KafkaMessage) async -> Admission {
        await seed(message.topicPartition)
        guard let before = tracker.starts(of: message) else { return .notOwned }
        if before >= maxStarts {
            if deadLettered.contains(message) {
                logger.info("offset \(message.offset) was dead-lettered by this worker before its partition moved uncommitted; not dead-lettered again",
                            metadata: ["partition": "\(message.partition)", "offset": "\(message.offset)"])
                return .deadLetteredAlready
            }
            return .quarantine(starts: before, withheld: before > maxStarts)
        }
        if before > 0 {
            logger.warning("offset \(message.offset) was started \(before) time(s) without an outcome: running it alone",
                           metadata: ["partition": "\(message.partition)", "offset": "\(message.offset)"])
        }
        return .run(isolated: before > 0)
    }

    /// Records one more start of `message` durably (this worker's state and the
    /// committed offset's metadata) before it runs; false when the partition is
    /// no longer this worker's.
    func recordStart(_ message: KafkaMessage) async -> Bool {
        guard let count = tracker.recordStart(of: message) else { return false }
        let position = DeliveryPosition(topic: message.topic, partition: message.partition, offset: message.offset)
        async let local: Void = recordLocally(position, count)
        let inKafka = await committer.commitStart(waitingAtMost: Self.kafkaWait)
        await local
        if !inKafka { unrecordedInKafka(message) }
        return true
    }

    /// Says, at most every 10 s (rebalances refuse commits for a while), that
    /// starts are counted locally only for now.
    private func unrecordedInKafka(_ message: KafkaMessage) {
        guard let count = unrecordedWarnings.occurred() else { return }
        logger.warning("\(count) start(s) not yet recorded in Kafka (the commit failed; the next one carries them); counted in this worker's state meanwhile",
                       metadata: ["partition": "\(message.partition)", "offset": "\(message.offset)"])
    }

    /// `message`'s dead letter is in the outbox.
    func deadLettered(_ message: KafkaMessage) { deadLettered.remember(message) }

    /// A message given back without an outcome (not a crash) loses its local record.
    func released(_ message: KafkaMessage) async {
        try? await state.clearStart(DeliveryPosition(topic: message.topic, partition: message.partition, offset: message.offset))
    }

    /// Partitions revoked: their records are read again if they come back.
    func forget(_ partitions: Set<TopicPartition>) {
        seeding.withLock { s in for p in partitions { s[p] = nil } }
    }

    private func recordLocally(_ position: DeliveryPosition, _ count: Int) async {
        do {
            try await state.recordStart(position, starts: count)
        } catch {
            logger.error("cannot record a start in the worker state: \(error)")
        }
    }

    /// Loads a partition's start records once per assignment: from the
    /// committed offset's metadata (the fleet's) and from this worker's state.
    /// (Requests the broker deleted unread are the consumer's to report.)
    private func seed(_ partition: TopicPartition) async {
        let task = seeding.withLock { s -> Task<Void, Never> in
            if let existing = s[partition] { return existing }
            let task = Task { [consumer, state, tracker, logger] in
                var committedOffset: Int64 = 0
                var remote: [Int64: Int] = [:]
                do {
                    if let committed = try await consumer.committed([partition]).first {
                        committedOffset = max(0, committed.offset)
                        remote = StartRecords.decode(committed.metadata).filter { $0.key >= committedOffset }
                    }
                } catch {
                    logger.warning("cannot read the committed start records of \(partition): \(error); using this worker's own")
                }
                let local = (try? await state.startRecords(topic: partition.topic, partition: partition.partition,
                                                            from: committedOffset)) ?? [:]
                let merged = remote.merging(local) { max($0, $1) }
                if !merged.isEmpty {
                    logger.info("\(partition): \(merged.count) message(s) were started without an outcome before (a worker stopped while running them)",
                                metadata: ["offsets": "\(merged.keys.sorted().prefix(20).map(String.init).joined(separator: ","))"])
                }
                tracker.seedStarts(merged, for: partition)
            }
            s[partition] = task
            return task
        }
        await task.value
    }
}
