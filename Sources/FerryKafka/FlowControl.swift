import CRdKafka
import DequeModule
import FerryCore
import Foundation
import Logging
import Synchronization
import FerryConcurrency

/// Pauses the assignment when the buffer is full (messages or bytes), resumes it
/// at a quarter. Driven
/// by the poll thread; the rebalance callback also runs on whichever thread
/// closes the consumer, so the flag is atomic.
final class FlowControl: Sendable {
    /// The rd_kafka_t, as its address (a pointer is not Sendable; the handle outlives this).
    private let handle = Atomic<Int>(0)
    private let logger: Logger
    private let pausedFlag = Atomic<Bool>(false)

    init(logger: Logger) { self.logger = logger }

    /// Set once, before the poll thread starts.
    func attach(_ rk: OpaquePointer) { handle.store(Int(bitPattern: rk), ordering: .releasing) }

    /// Brings newly assigned partitions in line with the flag. librdkafka keeps
    /// a partition's pause through unassign and assign, and a cooperative
    /// assignment only adds partitions: so while paused, the whole assignment
    /// is paused again; otherwise the new ones are resumed, in case they were
    /// paused when this member last owned them. (Resetting the flag instead
    /// left such partitions paused for good: a fleet test saw two partitions
    /// stop after a rebalance.)
    func assigned(_ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?) {
        if pausedFlag.load(ordering: .acquiring) {
            _ = apply(pause: true)
        } else if let list, let rk = OpaquePointer(bitPattern: handle.load(ordering: .acquiring)) {
            let err = rd_kafka_resume_partitions(rk, list)
            if err != RD_KAFKA_RESP_ERR_NO_ERROR { logger.warning("kafka consumer: \(KafkaError(err, context: "resume assigned"))") }
        }
    }

    /// Whether the whole assignment is paused now (a held partition is resumed only when it is not).
    var isPaused: Bool { pausedFlag.load(ordering: .acquiring) }

    /// `held`: partitions the reader holds, left paused when the rest resume
    /// (asked for only then: this runs before every poll).
    func adjust(count: Int, bytes: Int, capacity: Int, byteCapacity: Int, held: @autoclosure () -> Set<TopicPartition>) {
        let paused = pausedFlag.load(ordering: .acquiring)
        if !paused && (count >= capacity || bytes >= byteCapacity) {
            pausedFlag.store(apply(pause: true), ordering: .releasing)
        } else if paused && count <= capacity / 4 && bytes <= byteCapacity / 4 {
            pausedFlag.store(!apply(pause: false, except: held()), ordering: .releasing)
        }
    }

    private func apply(pause: Bool, except held: Set<TopicPartition> = []) -> Bool {
        guard let rk = OpaquePointer(bitPattern: handle.load(ordering: .acquiring)) else { return false }
        var assigned: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
        guard rd_kafka_assignment(rk, &assigned) == RD_KAFKA_RESP_ERR_NO_ERROR, var list = assigned else { return false }
        if !held.isEmpty, let kept = rd_kafka_topic_partition_list_new(list.pointee.cnt) {
            for i in 0..<Int(list.pointee.cnt) {
                let e = list.pointee.elems[i]
                if !held.contains(TopicPartition(topic: String(cString: e.topic), partition: e.partition)) {
                    rd_kafka_topic_partition_list_add(kept, e.topic, e.partition)
                }
            }
            rd_kafka_topic_partition_list_destroy(list)
            list = kept
        }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        let err = pause ? rd_kafka_pause_partitions(rk, list) : rd_kafka_resume_partitions(rk, list)
        if err != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.warning("kafka consumer: \(KafkaError(err, context: pause ? "pause" : "resume"))")
            return false
        }
        logger.debug("kafka consumer \(pause ? "paused" : "resumed") \(list.pointee.cnt) partitions")
        return true
    }
}
