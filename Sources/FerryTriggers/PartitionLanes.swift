import FerryKafka
import Foundation
import Logging
import Synchronization

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
        var messages: LaneQueue { state.queue }

        fileprivate init(partition: TopicPartition, state: LaneState, offsets: DispatchedOffsets) {
            self.partition = partition; self.state = state; self.offsets = offsets
        }

        /// True once the partition went to another consumer: stop, leave the rest to it.
        var isRevoked: Bool { state.revoked.load(ordering: .relaxed) }

        /// Everything up to and including `message` is handled (committable).
        func done(_ message: KafkaMessage) {
            state.pending.subtract(1, ordering: .relaxed)
            if !isRevoked { offsets.mark(message) }
        }

        /// `message` is dropped without being handled (revoked or shutting down).
        func skipped(_ message: KafkaMessage) { state.pending.subtract(1, ordering: .relaxed) }
    }

    fileprivate final class LaneState: Sendable {
        let queue = LaneQueue()
        let revoked = Atomic<Bool>(false)
        let pending = Atomic<Int>(0)
    }

    /// Messages a lane may hold before intake waits for it (bounds memory while a batch is retried).
    static let laneDepth = 4096

    fileprivate final class LaneTable: Sendable {
        let all = Mutex<[TopicPartition: LaneState]>([:])
        let assigned = Mutex<Set<TopicPartition>>([])
    }

    let consumer: KafkaConsumer
    private let table: LaneTable
    private let offsets = DispatchedOffsets()
    private let logger: Logger

    init(kafka: KafkaConfiguration, group: String, topics: [String], logger: Logger) throws(KafkaError) {
        var configuration = kafka
        configuration["group.id"] = group
        // Eager assignment: a dispatcher holds no per-partition state worth keeping
        // across a rebalance, and librdkafka 2.0.2's cooperative-sticky assignor
        // aborts the process when a member that never got an assignment is closed
        // (rd_kafka_sticky_assignor_state_destroy assertion, seen in our tests).
        if configuration["partition.assignment.strategy"] == nil { configuration["partition.assignment.strategy"] = "roundrobin" }
        let table = LaneTable()
        let offsets = self.offsets
        // Revoked partitions: their lanes stop at the next message; what they finished is committed on the way out.
        let rebalance = RebalanceHandler(assigned: { partitions in
            table.assigned.withLock { $0.formUnion(partitions) }
        }, revoked: { partitions in
            table.assigned.withLock { $0.subtract(partitions) }
            table.all.withLock { all in
                for partition in partitions {
                    all[partition]?.revoked.store(true, ordering: .relaxed)
                    all[partition]?.queue.finish()
                    all[partition] = nil
                }
            }
            return offsets.take(partitions)
        })
        consumer = try KafkaConsumer(configuration: configuration, subscribing: topics, bufferCapacity: 2048,
                                     rebalance: rebalance, logger: logger)
        self.table = table
        self.logger = logger
    }

    /// The partitions this consumer owns now.
    var assignedPartitions: Set<TopicPartition> { table.assigned.withLock { $0 } }

    /// Routes messages to lanes until cancelled; `work` runs once per lane.
    func run(_ work: @escaping @Sendable (Lane) async -> Void) async {
        await withTaskCancellationHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { [self] in
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .milliseconds(100))
                        await commit(offsets.take(nil))
                    }
                }
                for await message in consumer {
                    let partition = TopicPartition(topic: message.topic, partition: message.partition)
                    let (state, lane) = table.all.withLock { all -> (LaneState, Lane?) in
                        if let state = all[partition] { return (state, nil) }
                        let state = LaneState()
                        all[partition] = state
                        return (state, Lane(partition: partition, state: state, offsets: offsets))
                    }
                    if let lane { group.addTask { await work(lane) } }
                    while state.pending.load(ordering: .relaxed) >= Self.laneDepth && !Task.isCancelled && !state.revoked.load(ordering: .relaxed) {
                        try? await Task.sleep(for: .milliseconds(10))
                    }
                    state.pending.add(1, ordering: .relaxed)
                    state.queue.push(message)
                }
                table.all.withLock { all in all.values.forEach { $0.queue.finish() } }
                // Lanes end after their current message (an interrupted one stays uncommitted).
                group.cancelAll()
                for await _ in group {}
            }
            await commit(offsets.take(nil))
            await consumer.close()
        } onCancel: {
            consumer.stopFetching()
        }
    }

    private func commit(_ list: [TopicPartitionOffset]) async {
        guard !list.isEmpty else { return }
        do {
            try await consumer.commit(list)
        } catch {
            // Not fatal: the records are delivered again, and handlers tolerate duplicates.
            logger.warning("trigger dispatcher: commit failed: \(error)")
        }
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
