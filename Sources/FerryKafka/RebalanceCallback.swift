import CRdKafka
import DequeModule
import FerryCore
import Foundation
import Logging
import Synchronization
import FerryConcurrency

/// What the owner of a group consumer does when partitions come and go.
/// Both run on the consumer's poll thread, inside the rebalance.
public struct RebalanceHandler: Sendable {
    /// After partitions are assigned to this consumer.
    public var assigned: @Sendable ([TopicPartition]) -> Void
    /// Before partitions are taken away: stop work on them (this may block for
    /// a bounded grace period) and return the offsets to commit before they go.
    public var revoked: @Sendable ([TopicPartition]) -> [TopicPartitionOffset]

    public init(assigned: @escaping @Sendable ([TopicPartition]) -> Void,
                revoked: @escaping @Sendable ([TopicPartition]) -> [TopicPartitionOffset]) {
        self.assigned = assigned
        self.revoked = revoked
    }
}

final class RebalanceBox: Sendable {
    let handler: RebalanceHandler
    let buffer: MessageBuffer
    let flow: FlowControl
    let gaps: GapDetector
    let logger: Logger
    /// Whether an assignment (even an empty one) ever arrived.
    let everAssigned = Atomic<Bool>(false)
    /// The partitions assigned now, and the assignments received (one per rebalance taken part in).
    let assignedCount = Atomic<Int>(0)
    let assignments = Atomic<Int>(0)
    init(handler: RebalanceHandler, buffer: MessageBuffer, flow: FlowControl, gaps: GapDetector, logger: Logger) {
        self.handler = handler; self.buffer = buffer; self.flow = flow; self.gaps = gaps; self.logger = logger
    }

    /// The assignment, kept from the callbacks' lists as librdkafka applies
    /// them: an incremental (cooperative) callback names only the partitions
    /// that change; an eager one names the whole assignment. It is not read back
    /// with `rd_kafka_assignment`: in the revoke that `rd_kafka_consumer_close`
    /// serves, that call waited forever for librdkafka's group thread, and a
    /// CI run's worker never stopped (its stacks: `rd_kafka_assignment` ←
    /// `countAssignment` ← the rebalance callback ← `KafkaConsumer.closeNow`).
    private let assigned = Mutex<Set<TopicPartition>>([])

    func assignmentChanged(assigned partitions: [TopicPartition], cooperative: Bool) {
        let count = assigned.withLock { set in
            if !cooperative { set.removeAll() }
            set.formUnion(partitions)
            return set.count
        }
        assignedCount.store(count, ordering: .relaxed)
    }

    func assignmentChanged(revoked partitions: [TopicPartition], cooperative: Bool) {
        let count = assigned.withLock { set in
            if cooperative { set.subtract(partitions) } else { set.removeAll() }
            return set.count
        }
        assignedCount.store(count, ordering: .relaxed)
    }
}

let rebalanceCallback: @convention(c) (OpaquePointer?, rd_kafka_resp_err_t, UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
                                               UnsafeMutableRawPointer?) -> Void = { rk, err, list, opaque in
    guard let rk, let opaque else { return }
    let box = Unmanaged<RebalanceBox>.fromOpaque(opaque).takeUnretainedValue()
    let cooperative = String(cString: rd_kafka_rebalance_protocol(rk)) == "COOPERATIVE"
    var partitions: [TopicPartition] = []
    if let list {
        for i in 0..<Int(list.pointee.cnt) {
            let element = list.pointee.elems[i]
            partitions.append(TopicPartition(topic: String(cString: element.topic), partition: element.partition))
        }
    }
    func check(_ error: OpaquePointer?, _ what: String) {
        guard let error else { return }
        box.logger.error("kafka consumer: \(what) failed: \(String(cString: rd_kafka_error_string(error)))")
        rd_kafka_error_destroy(error)
    }
    switch err {
    case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
        box.everAssigned.store(true, ordering: .releasing)
        // Before fetching starts: where the group left each partition, so
        // that messages deleted before the first read are counted too.
        box.gaps.assigned(partitions, committed: committedOffsets(rk: rk, list))
        if cooperative { check(rd_kafka_incremental_assign(rk, list), "incremental assign") } else { rd_kafka_assign(rk, list) }
        box.flow.assigned(list)
        box.assignmentChanged(assigned: partitions, cooperative: cooperative)
        box.assignments.add(1, ordering: .relaxed)
        box.logger.info("partitions assigned: \(partitions.map(\.description).joined(separator: ", "))")
        box.handler.assigned(partitions)
    case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
        box.gaps.forget(partitions)
        let dropped = box.buffer.discard(Set(partitions))
        box.logger.info("partitions revoked: \(partitions.map(\.description).joined(separator: ", ")) (\(dropped) buffered messages left to the next owner)")
        let offsets = box.handler.revoked(partitions)
        if !offsets.isEmpty {
            // Bounded: this runs on the poll thread, inside the rebalance.
            let e = KafkaConsumer.commitBounded(rk: rk, offsets, timeoutMs: 5_000)
            if e != RD_KAFKA_RESP_ERR_NO_ERROR { box.logger.warning("kafka consumer: \(KafkaError(e, context: "commit on revoke"))") }
        }
        if cooperative { check(rd_kafka_incremental_unassign(rk, list), "incremental unassign") } else { rd_kafka_assign(rk, nil) }
        box.assignmentChanged(revoked: partitions, cooperative: cooperative)
    default:
        box.logger.error("kafka consumer: rebalance error \(KafkaError(err, context: "rebalance"))")
        if cooperative { check(rd_kafka_incremental_unassign(rk, list), "incremental unassign") } else { rd_kafka_assign(rk, nil) }
        box.assignmentChanged(revoked: partitions, cooperative: cooperative)
    }
}

/// The group's committed offset of each partition in `list` (negative when
/// none), asked synchronously, as the rebalance callback needs it before it
/// assigns; nil when the coordinator does not answer within 5 s.
private func committedOffsets(rk: OpaquePointer, _ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?) -> [TopicPartition: Int64]? {
    guard let list, list.pointee.cnt > 0 else { return [:] }
    // A copy: rd_kafka_committed writes its answers into the list, and the
    // callback's list is what gets assigned.
    guard let copy = rd_kafka_topic_partition_list_copy(list) else { return nil }
    defer { rd_kafka_topic_partition_list_destroy(copy) }
    guard rd_kafka_committed(rk, copy, 5_000) == RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
    var offsets: [TopicPartition: Int64] = [:]
    for i in 0..<Int(copy.pointee.cnt) {
        let e = copy.pointee.elems[i]
        // A partition answered with an error is unknown, not "none": so is the whole answer.
        guard e.err == RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        offsets[TopicPartition(topic: String(cString: e.topic), partition: e.partition)] = e.offset
    }
    return offsets
}
