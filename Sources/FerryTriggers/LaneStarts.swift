import FerryTriggerKit
import FerryCore
import FerryKafka
import Foundation
import Logging
import Synchronization
import FerryConcurrency

/// The crash-loop breaker of trigger delivery. Handlers run in the worker's
/// process: one that traps on some event (an index out of range, a
/// `fatalError`) kills the worker, and the event, delivered again, killed
/// every worker that took it, for ever, stopping its partition (and, on a
/// worker with every role, its transfers).
///
/// As for requests (`CrashLoopBreaker`), an invocation's messages are
/// recorded as started in the metadata of the group's committed offset
/// (`StartRecords`, a synchronous commit) before the handler runs, and the
/// records go when the invocation has an outcome or is given back (shutdown,
/// rebalance). Whoever takes the partition next reads them, so the count
/// holds across the fleet. A message with records is a suspect: it runs
/// alone in the process (`IsolationGate.process`), one message at a time.
/// One with `maxStarts` records is not run: its failure record says so
/// (condition `WorkerCrashed`) and its offset is committed.
final class LaneStarts: Sendable {
    enum Admission: Equatable, Sendable {
        /// Invoke (the caller runs it alone in the process when one of the messages is a suspect).
        case run
        /// Do not invoke: the message was started this often without an outcome.
        case quarantine(starts: Int)
    }

    let maxStarts: Int
    private let consumer: KafkaConsumer
    private let logger: Logger
    private struct Records {
        /// Starts without an outcome per offset: those read from Kafka plus this consumer's.
        var starts: [Int64: Int] = [:]
        /// Offsets this consumer started and has not settled.
        var own: Set<Int64> = []
    }
    private let records = Mutex<[TopicPartition: Records]>([:])
    private let seeding = Mutex<[TopicPartition: Task<Void, Never>]>([:])
    /// Commits go one at a time, each with the records as they stand when it
    /// is sent (a commit computed earlier and sent later would erase a newer
    /// start), and callers that arrive while one is in flight share the next
    /// (group commit): the lanes' starts do not queue behind each other.
    private struct CommitQueue {
        var running = false
        var positions: [TopicPartition: Int64] = [:]
        var givingBack = false
        var waiters: [@Sendable (Bool) -> Void] = []
    }
    private let queue = Mutex(CommitQueue())
    /// Whether Kafka took the last commit. A rebalance holds a group's commits
    /// until every member has rejoined: starts then wait for none (the next
    /// commit Kafka takes carries them), as the request breaker's do.
    private let takingCommits = Atomic<Bool>(true)
    private let unrecordedWarnings = WarningThrottle()
    /// Messages this consumer sent to the failure destination: a rebalance
    /// that refuses the commit past them brings them back here.
    private let failed = RememberedMessages(capacity: 1024)
    /// How long a start waits for Kafka to take its record.
    static let kafkaWait: Double = 5

    init(maxStarts: Int, consumer: KafkaConsumer, logger: Logger) {
        self.maxStarts = maxStarts
        self.consumer = consumer
        self.logger = logger
    }

    /// Starts recorded for `message` so far (its partition's records read first, once per assignment).
    func prior(_ message: KafkaMessage) async -> Int {
        let partition = TopicPartition(topic: message.topic, partition: message.partition)
        await seed(partition)
        return records.withLock { $0[partition]?.starts[message.offset] ?? 0 }
    }

    /// Decides for `messages` (one lane's, in order, from `position`: every
    /// offset before it is handled) and, unless quarantined, records one more
    /// start of each, durably in Kafka, before returning.
    func admit(_ messages: [KafkaMessage], position: Int64) async -> Admission {
        guard let first = messages.first else { return .run }
        var most = 0
        for message in messages { most = max(most, await prior(message)) }
        if most >= maxStarts { return .quarantine(starts: most) }
        let partition = TopicPartition(topic: first.topic, partition: first.partition)
        records.withLock { all in
            for message in messages {
                all[partition, default: Records()].starts[message.offset, default: 0] += 1
                all[partition, default: Records()].own.insert(message.offset)
            }
        }
        if most > 0 {
            logger.warning("trigger delivery: offset \(first.offset) was being handled when a worker stopped (\(most) time(s)); running it alone",
                           metadata: ["partition": "\(first.partition)", "offset": "\(first.offset)"])
        }
        let list = [TopicPartitionOffset(topic: partition.topic, partition: partition.partition, offset: position)]
        let recorded = OnceValue<Bool>()
        if takingCommits.load(ordering: .relaxed) {
            Task { [self] in _ = recorded.deliver(await commit(list)) }
            let timer = DeadlineTimer.start(after: Self.kafkaWait) { _ = recorded.deliver(false) }
            if await !recorded.value { unrecorded(first) }
            timer.cancel()
        } else {
            Task { [self] in _ = await commit(list) }
            unrecorded(first)
        }
        return .run
    }

    /// Whether every one of `messages` was sent to the failure destination by this consumer already (said in the log).
    func wasDeadLettered(_ messages: [KafkaMessage]) -> Bool {
        let written = failed.containsAll(messages)
        if written, let first = messages.first {
            logger.info("trigger delivery: offset \(first.offset) was sent to its failure destination by this worker before its partition moved uncommitted; not sent again",
                        metadata: ["partition": "\(first.partition)", "offset": "\(first.offset)"])
        }
        return written
    }

    /// `messages` were sent to the failure destination.
    func deadLettered(_ messages: [KafkaMessage]) { failed.remember(messages) }

    /// `message` has an outcome: its records go.
    func finished(_ message: KafkaMessage) {
        let partition = TopicPartition(topic: message.topic, partition: message.partition)
        records.withLock { all in
            all[partition]?.starts[message.offset] = nil
            all[partition]?.own.remove(message.offset)
        }
    }

    /// `message` was given back without an outcome (a shutdown, a rebalance):
    /// the start this consumer recorded is taken back, as it was no death.
    func givenBack(_ message: KafkaMessage) {
        let partition = TopicPartition(topic: message.topic, partition: message.partition)
        records.withLock { all in
            guard all[partition]?.own.remove(message.offset) != nil else { return }
            let left = (all[partition]?.starts[message.offset] ?? 1) - 1
            all[partition]?.starts[message.offset] = left > 0 ? left : nil
        }
    }

    /// Partitions that left this consumer: their records are read again if they come back.
    func forget(_ partitions: [TopicPartition]) {
        records.withLock { all in for p in partitions { all[p] = nil } }
        seeding.withLock { s in for p in partitions { s[p] = nil } }
    }

    /// `offsets` with the metadata that records what was started at or after
    /// each; `givingBack` leaves out this consumer's own starts not yet
    /// settled (the partition is leaving it, and that is no death).
    func withRecords(_ offsets: [TopicPartitionOffset], givingBack: Bool = false) -> [TopicPartitionOffset] {
        records.withLock { all in
            offsets.map { o in
                var o = o
                let partition = TopicPartition(topic: o.topic, partition: o.partition)
                var starts = (all[partition]?.starts ?? [:]).filter { $0.key >= o.offset }
                if givingBack {
                    for offset in all[partition]?.own ?? [] { starts[offset] = (starts[offset] ?? 1) - 1 }
                }
                o.metadata = StartRecords.encode(starts)
                return o
            }
        }
    }

    /// `offsets`, plus the position of each partition in `positions` that has
    /// records to keep or clear and no offset in `offsets` yet.
    func addingPositions(_ positions: [TopicPartition: Int64], to offsets: [TopicPartitionOffset]) -> [TopicPartitionOffset] {
        let listed = Set(offsets.map { TopicPartition(topic: $0.topic, partition: $0.partition) })
        let withRecords = records.withLock { all in Set(all.filter { !$0.value.starts.isEmpty || !$0.value.own.isEmpty }.keys) }
        return offsets + positions.filter { withRecords.contains($0.key) && !listed.contains($0.key) }
            .map { TopicPartitionOffset(topic: $0.key.topic, partition: $0.key.partition, offset: $0.value) }
    }

    /// Commits `offsets` with the records as they stand, one commit at a time;
    /// true when Kafka took it.
    @discardableResult
    func commit(_ offsets: [TopicPartitionOffset], givingBack: Bool = false) async -> Bool {
        guard !offsets.isEmpty else { return true }
        return await withCheckedContinuation { continuation in
            let starts = queue.withLock { q -> Bool in
                for o in offsets {
                    let partition = TopicPartition(topic: o.topic, partition: o.partition)
                    q.positions[partition] = max(q.positions[partition] ?? o.offset, o.offset)
                }
                q.givingBack = q.givingBack || givingBack
                q.waiters.append { continuation.resume(returning: $0) }
                guard !q.running else { return false }
                q.running = true
                return true
            }
            if starts { Task { await drain() } }
        }
    }

    /// Sends the queued commits, one at a time, until none is waiting.
    private func drain() async {
        while true {
            let next = queue.withLock { q -> (list: [TopicPartitionOffset], givingBack: Bool, waiters: [@Sendable (Bool) -> Void])? in
                guard !q.waiters.isEmpty else { q.running = false; return nil }
                defer { q.positions = [:]; q.givingBack = false; q.waiters = [] }
                let list = q.positions.map { TopicPartitionOffset(topic: $0.key.topic, partition: $0.key.partition, offset: $0.value) }
                return (list, q.givingBack, q.waiters)
            }
            guard let next else { return }
            let taken: Bool
            var offsets: [TopicPartitionOffset] = []
            do {
                offsets = withRecords(next.list, givingBack: next.givingBack)
                try await consumer.commit(offsets)
                taken = true
            } catch {
                // Not fatal: messages are delivered again, and handlers tolerate duplicates.
                logger.warning("trigger dispatcher: commit failed: \(error)")
                taken = false
            }
            takingCommits.store(taken, ordering: .relaxed)
            next.waiters.forEach { $0(taken) }
            if taken { await StartRecordsProbe.shared.verify(offsets, consumer: consumer, logger: logger) }
        }
    }

    /// Says, at most every 10 s, that starts are not yet in Kafka (the next commit carries them).
    private func unrecorded(_ message: KafkaMessage) {
        guard let count = unrecordedWarnings.occurred() else { return }
        logger.warning("trigger delivery: \(count) start(s) not yet recorded in Kafka (commits are held or failing; the next one carries them)",
                       metadata: ["partition": "\(message.partition)", "offset": "\(message.offset)"])
    }

    private func seed(_ partition: TopicPartition) async {
        let task = seeding.withLock { s -> Task<Void, Never> in
            if let existing = s[partition] { return existing }
            let task = Task { [self] in
                do {
                    guard let committed = try await consumer.committed([partition]).first else { return }
                    let found = StartRecords.decode(committed.metadata).filter { $0.key >= max(0, committed.offset) }
                    guard !found.isEmpty else { return }
                    logger.warning("trigger delivery: \(found.count) message(s) of \(partition) were being handled when a worker stopped",
                                   metadata: ["offsets": "\(found.keys.sorted().prefix(20).map(String.init).joined(separator: ","))"])
                    records.withLock { all in
                        all[partition, default: Records()].starts.merge(found) { max($0, $1) }
                    }
                } catch {
                    logger.warning("cannot read the committed start records of \(partition): \(error)")
                }
            }
            s[partition] = task
            return task
        }
        await task.value
    }
}
