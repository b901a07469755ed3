import FerryCore
import FerryTriggerKit
import FerryKafka
import Foundation
import Logging
import Metrics
import Synchronization
import FerryConcurrency

/// A group consumer whose partitions are worked on side by side, each in its
/// own lane, in offset order: so the records of one key (one partition) are
/// handled one after another while other partitions go on. A lane marks each
/// message done; the last done offset per partition is committed every 100 ms.
final class PartitionLanes: Sendable {
    /// What a lane reads and reports.
    struct Lane: Sendable {
        let partition: TopicPartition
        private let state: LaneState
        private let offsets: DispatchedOffsets
        private let starts: LaneStarts
        var messages: LaneQueue { state.queue }

        fileprivate init(partition: TopicPartition, state: LaneState, offsets: DispatchedOffsets, starts: LaneStarts) {
            self.partition = partition; self.state = state; self.offsets = offsets; self.starts = starts
        }

        /// True once the partition went to another consumer: stop, leave the rest to it.
        var isRevoked: Bool { state.revoked.load(ordering: .relaxed) }

        /// Whether `message` was being handled when a worker stopped (it then runs alone, by itself).
        func isSuspect(_ message: KafkaMessage) async -> Bool { await starts.prior(message) > 0 }

        /// Handles `messages` (the next ones of this lane, in order) under the
        /// crash-loop breaker, inside `IsolationGate.process` until they are
        /// settled: alone when `alone` (a suspect among them), after every
        /// breaker's records are brought up to date. Their starts are recorded
        /// in Kafka before `run`; a message started `maxStarts` times without
        /// an outcome goes to `quarantined` (with that count) instead. False
        /// when the partition left meanwhile, else what the chosen body says.
        func guarded(_ messages: [KafkaMessage], alone: Bool, run: () async -> Bool,
                     quarantined: (_ starts: Int) async -> Bool) async -> Bool {
            await IsolationGate.process.enter(exclusive: alone)
            defer { IsolationGate.process.leave(exclusive: alone) }
            guard !isRevoked, let first = messages.first else { return false }
            if alone { await IsolationGate.process.settleAll() }
            state.position.store(first.offset, ordering: .relaxed)
            switch await starts.admit(messages, position: first.offset) {
            case .quarantine(let count):
                // Written by this consumer before the partition left it and came back uncommitted: not again.
                if starts.wasDeadLettered(messages) { return true }
                // Until `done` (or `skipped`) settles the last of them, a revocation waits for the record.
                guard let last = messages.last, state.quarantine.begin(through: last.offset) else { return false }
                await TriggerTestTrap.failureRecordHold.hold("failure record", of: first) { isRevoked }
                let written = await quarantined(count)
                if written { starts.deadLettered(messages) }
                return written
            case .run: return await run()
            }
        }

        /// Everything up to and including `message` is handled (committable).
        func done(_ message: KafkaMessage) {
            state.pending.subtract(1, ordering: .relaxed)
            state.releaseIfRoom()
            starts.finished(message)
            state.position.store(message.offset + 1, ordering: .relaxed)
            // A quarantined message is marked also while its partition is being
            // revoked: the revocation waits for it (`QuarantineWrite`).
            if !state.quarantine.settled(message.offset, done: { offsets.mark(message) }), !isRevoked { offsets.mark(message) }
        }

        /// `message` is dropped without being handled (revoked or shutting
        /// down): given back, so a start recorded for it is no death.
        func skipped(_ message: KafkaMessage) {
            state.pending.subtract(1, ordering: .relaxed)
            state.releaseIfRoom()
            starts.givenBack(message)
            _ = state.quarantine.settled(message.offset) {}
        }
    }

    fileprivate final class LaneState: Sendable {
        let queue = LaneQueue()
        let revoked = Atomic<Bool>(false)
        let pending = Atomic<Int>(0)
        /// The first offset not yet handled (-1 until the lane admits one).
        let position = Atomic<Int64>(-1)
        let quarantine = QuarantineWrite()
        let partition: TopicPartition
        let depth: Int
        let consumer: KafkaConsumer
        /// Whether the consumer holds this lane's partition (the lane was full).
        private let held = Mutex(false)

        init(partition: TopicPartition, depth: Int, consumer: KafkaConsumer) {
            self.partition = partition; self.depth = depth; self.consumer = consumer
        }

        /// Takes `message` into the lane; a full lane instead gives it back and
        /// has the consumer hold its partition, so the other lanes go on.
        func admit(_ message: KafkaMessage) {
            held.withLock { held in
                if held || (pending.load(ordering: .relaxed) >= depth && !revoked.load(ordering: .relaxed)) {
                    held = true
                    consumer.hold(givingBack: message)
                    return
                }
                pending.add(1, ordering: .relaxed)
                queue.push(message)
            }
        }

        /// Lets a held partition be fetched again once half the lane is free.
        func releaseIfRoom() {
            held.withLock { held in
                guard held, pending.load(ordering: .relaxed) <= depth / 2 else { return }
                held = false
                consumer.release(partition)
            }
        }
    }

    /// Messages a lane may hold (queued, or in a batch not yet done) before
    /// intake waits for it, unless a batch needs more: a trigger group holds
    /// at most its partitions × this in memory. A lagging group's backlog
    /// belongs in Kafka, not in the worker's heap (see BENCHMARKS.md, S6).
    static let defaultLaneDepth = 256

    /// This consumer's lane depth: at least `defaultLaneDepth`, and at least
    /// the largest batch a lane must gather (Lambda allows 10,000).
    let laneDepth: Int

    /// How long a revocation waits for a `WorkerCrashed` record under way
    /// (one Kafka write; longer only while Kafka refuses it). The rebalance
    /// callback blocks the consumer's poll meanwhile: a broker waits for the
    /// member's rejoin up to max.poll.interval.ms (300 s), the embedded
    /// cluster for its session timeout less 1 s (5 s).
    static let quarantineWait: Double = 4

    /// The breaker, as the rebalance handler reaches it (set once it exists).
    fileprivate final class StartsSlot: Sendable {
        let starts = Mutex<LaneStarts?>(nil)
    }

    fileprivate final class LaneTable: Sendable {
        let all = Mutex<[TopicPartition: LaneState]>([:])
        let assigned = Mutex<Set<TopicPartition>>([])
    }

    let consumer: KafkaConsumer
    /// The consumer group: the `group` label of this consumer's gauges.
    let group: String
    private let table: LaneTable
    private let breaker: StartsSlot
    private let offsets = DispatchedOffsets()
    let starts: LaneStarts
    private let logger: Logger

    init(kafka: KafkaConfiguration, group: String, topics: [String], maxStarts: Int, batchSize: Int = 1,
         logger: Logger) throws(KafkaError) {
        laneDepth = max(Self.defaultLaneDepth, batchSize)
        var configuration = kafka
        configuration["group.id"] = group
        // Eager assignment: a dispatcher holds no per-partition state worth keeping
        // across a rebalance, and librdkafka 2.0.2's cooperative-sticky assignor
        // aborts the process when a member that never got an assignment is closed
        // (rd_kafka_sticky_assignor_state_destroy assertion, seen in our tests).
        if configuration["partition.assignment.strategy"] == nil { configuration["partition.assignment.strategy"] = "roundrobin" }
        let table = LaneTable()
        let offsets = self.offsets
        let breaker = StartsSlot()
        // Revoked partitions: their lanes stop at the next message; what they finished is committed on the way out,
        // and a message still being handled is given back (its start record cleared: a rebalance is no death).
        let rebalance = RebalanceHandler(assigned: { partitions in
            table.assigned.withLock { $0.formUnion(partitions) }
        }, revoked: { partitions in
            table.assigned.withLock { $0.subtract(partitions) }
            let leaving = table.all.withLock { all in
                partitions.compactMap { partition -> LaneState? in
                    all[partition]?.revoked.store(true, ordering: .relaxed)
                    all[partition]?.queue.finish()
                    return all[partition]
                }
            }
            // A failure record being written lands first, and its offset goes into the commit below.
            let deadline = Date().addingTimeInterval(Self.quarantineWait)
            for state in leaving where !state.quarantine.revoke(waitingUntil: deadline) {
                logger.warning("a WorkerCrashed failure record was still being written \(Self.quarantineWait) s after its partition began to leave: the next owner may write it again")
            }
            let positions = table.all.withLock { all -> [TopicPartition: Int64] in
                var positions: [TopicPartition: Int64] = [:]
                for partition in partitions {
                    if let position = all[partition]?.position.load(ordering: .relaxed), position >= 0 { positions[partition] = position }
                    all[partition] = nil
                }
                return positions
            }
            let list = offsets.take(partitions)
            guard let starts = breaker.starts.withLock({ $0 }) else { return list }
            // Committed by the consumer as returned: with the records, less what is being given back.
            let committed = starts.withRecords(starts.addingPositions(positions, to: list), givingBack: true)
            starts.forget(partitions)
            return committed
        })
        consumer = try KafkaConsumer(configuration: configuration, subscribing: topics, bufferCapacity: 2048,
                                     rebalance: rebalance, logger: logger)
        starts = LaneStarts(maxStarts: maxStarts, consumer: consumer, logger: logger)
        breaker.starts.withLock { [starts] in $0 = starts }
        self.breaker = breaker
        self.table = table
        self.group = group
        self.logger = logger
    }

    /// Messages taken from the consumer and not yet done or given back, over all lanes.
    var heldMessages: Int { table.all.withLock { $0.values.reduce(0) { $0 + $1.pending.load(ordering: .relaxed) } } }

    /// Lambda's `OffsetLag` of a Kafka event source, per partition this
    /// consumer owns: the messages from the first one its lane has not handled
    /// to the partition's end (the high watermark as librdkafka last saw it),
    /// so what waits in Kafka, in a held partition's set-aside and in the lane
    /// all count. A partition whose lane has not begun counts from the fetch position.
    var offsetLag: [(TopicPartition, Int64)] { consumer.lag(from: lanePositions()) }

    /// Every 5 s until cancelled: `ferry_trigger_offset_lag{group,topic,partition}`,
    /// `ferry_trigger_lane_messages{group}`, the group's assignment (a
    /// partition no longer owned, and every partition once stopped, reports 0:
    /// its lag is another worker's now) and `ferry_trigger_records_lost_total{group}`.
    private func reportLag() async {
        func record(_ partition: TopicPartition, _ lag: Int64) {
            Gauge(label: "ferry_trigger_offset_lag",
                  dimensions: [("group", group), ("topic", partition.topic), ("partition", "\(partition.partition)")]).record(lag)
        }
        var reported: Set<TopicPartition> = []
        var assignment = AssignmentMetrics(group: group)
        // Records the broker deleted before this group read them (each gap is also an error in the log).
        var lostReported: Int64 = 0
        func countLost() {
            let lost = consumer.messagesLost
            guard lost > lostReported else { return }
            Counter(label: "ferry_trigger_records_lost_total", dimensions: [("group", group)]).increment(by: lost - lostReported)
            lostReported = lost
        }
        while !Task.isCancelled {
            assignment.sample(consumer)
            countLost()
            let lags = offsetLag
            for (partition, lag) in lags { record(partition, lag) }
            let owned = Set(lags.map(\.0))
            for gone in reported.subtracting(owned) { record(gone, 0) }
            reported = owned
            Gauge(label: "ferry_trigger_lane_messages", dimensions: [("group", group)]).record(heldMessages)
            try? await Task.sleep(for: .seconds(5))
        }
        for partition in reported { record(partition, 0) }
        Gauge(label: "ferry_trigger_lane_messages", dimensions: [("group", group)]).record(0)
        assignment.stopped()
        countLost()
    }

    /// The partitions this consumer owns now.
    var assignedPartitions: Set<TopicPartition> { table.assigned.withLock { $0 } }

    /// Routes messages to lanes until cancelled; `work` runs once per lane.
    func run(_ work: @escaping @Sendable (Lane) async -> Void) async {
        // Before a suspect of any kind runs alone, this group's records in Kafka are brought up to date.
        let settler = IsolationGate.process.addSettler { [self] in await starts.commit(committable()) }
        defer { IsolationGate.process.removeSettler(settler) }
        await withTaskCancellationHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { [self] in
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .milliseconds(100))
                        await starts.commit(offsets.take(nil))
                    }
                }
                group.addTask { [self] in await reportLag() }
                for await message in consumer {
                    let partition = TopicPartition(topic: message.topic, partition: message.partition)
                    let (state, lane) = table.all.withLock { all -> (LaneState, Lane?) in
                        if let state = all[partition] { return (state, nil) }
                        let state = LaneState(partition: partition, depth: laneDepth, consumer: consumer)
                        all[partition] = state
                        return (state, Lane(partition: partition, state: state, offsets: offsets, starts: starts))
                    }
                    if let lane { group.addTask { await work(lane) } }
                    state.admit(message)
                }
                table.all.withLock { all in all.values.forEach { $0.queue.finish() } }
                // Lanes end after their current message (an interrupted one stays uncommitted).
                group.cancelAll()
                for await _ in group {}
            }
            // What was handled, and the records of what was interrupted cleared: a shutdown is no death.
            await starts.commit(committable(), givingBack: true)
            await consumer.close()
            // The consumer's rebalance handler holds the table and the breaker,
            // and both hold the consumer (a lane's state, to hold and release
            // its partition; the breaker, to write start records): emptied,
            // the consumer's handle is freed with this object.
            table.all.withLock { $0.removeAll() }
            breaker.starts.withLock { $0 = nil }
        } onCancel: {
            consumer.stopFetching()
        }
    }

    /// The offsets handled since the last commit, and the position of every
    /// partition with start records to keep or clear.
    private func committable() -> [TopicPartitionOffset] {
        starts.addingPositions(lanePositions(), to: offsets.take(nil))
    }

    /// Per lane that has begun, the offset of the first message it has not handled.
    private func lanePositions() -> [TopicPartition: Int64] {
        table.all.withLock { all in all.compactMapValues { s -> Int64? in
            let position = s.position.load(ordering: .relaxed)
            return position >= 0 ? position : nil
        } }
    }
}

/// The next offset to commit per partition, as messages finish.
final class DispatchedOffsets: Sendable {
    private let next = Mutex<[TopicPartition: Int64]>([:])

    func mark(_ message: KafkaMessage) {
        next.withLock { $0[TopicPartition(topic: message.topic, partition: message.partition)] = message.offset + 1 }
    }

    /// Takes the pending offsets of `partitions` (nil: all).
    func take(_ partitions: [TopicPartition]?) -> [TopicPartitionOffset] {
        next.withLock { pending in
            let chosen = partitions ?? Array(pending.keys)
            return chosen.compactMap { partition in
                pending.removeValue(forKey: partition).map { TopicPartitionOffset(topic: partition.topic, partition: partition.partition, offset: $0) }
            }
        }
    }
}
