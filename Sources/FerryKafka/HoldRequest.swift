import CRdKafka
import FerryCore
import Logging
import FerryConcurrency

/// A hold or release of one partition (`KafkaConsumer.hold`), carried out by
/// the consumer's poll thread: the only thread that pauses and resumes
/// partitions and that appends to the buffer, so a flow-control resume cannot
/// undo a hold, and no message fetched before a hold arrives after its release.
enum HoldRequest: Sendable {
    case hold(TopicPartition)
    case release(TopicPartition)

    var partition: TopicPartition {
        switch self {
        case .hold(let partition), .release(let partition): partition
        }
    }

    /// `seekFailures` throttles the warning of a seek that keeps failing: it
    /// is tried again on every poll (100 ms), and one line per 10 s says how often.
    func carryOut(rk: OpaquePointer, buffer: MessageBuffer, flow: FlowControl, gaps: GapDetector, seekFailures: WarningThrottle,
                  logger: Logger) {
        guard case .some(let refetchFrom) = buffer.refetchOffset(partition) else { return }  // left this consumer meanwhile
        let list = rd_kafka_topic_partition_list_new(1)
        defer { rd_kafka_topic_partition_list_destroy(list) }
        let element = rd_kafka_topic_partition_list_add(list, partition.topic, partition.partition)!
        switch self {
        case .hold:
            // Should the pause fail, what arrives is set aside or dropped as
            // while paused, and the release's seek fetches the dropped again.
            var err = rd_kafka_pause_partitions(rk, list)
            if err == RD_KAFKA_RESP_ERR_NO_ERROR { err = element.pointee.err }
            if err != RD_KAFKA_RESP_ERR_NO_ERROR { logger.warning("kafka consumer: \(KafkaError(err, context: "pause \(partition)"))") }
            logger.debug("kafka consumer: holding \(partition)")
        case .release:
            if let offset = refetchFrom {
                // Rewound while still paused (librdkafka discards what it fetched
                // before the pause or the seek; with no timeout the seek is under
                // way, `_IN_PROGRESS`); a failed seek keeps it held and is tried again.
                element.pointee.offset = offset
                var failure: String?
                if let error = rd_kafka_seek_partitions(rk, list, 0) {
                    failure = String(cString: rd_kafka_error_string(error))
                    rd_kafka_error_destroy(error)
                } else if element.pointee.err != RD_KAFKA_RESP_ERR_NO_ERROR && element.pointee.err != RD_KAFKA_RESP_ERR__IN_PROGRESS {
                    failure = "\(KafkaError(element.pointee.err, context: "seek"))"
                }
                if let failure {
                    if let count = seekFailures.occurred() {
                        logger.warning("kafka consumer: seek \(partition) to \(offset) failed (\(count) time(s) since the last such line), its release is tried again: \(failure)")
                    }
                    _ = buffer.requestRelease(partition)
                    return
                }
                gaps.rewind(partition, to: offset)
            }
            guard buffer.endHold(partition) else { return }
            // While the whole assignment is paused (buffer full), its resume brings this one back too.
            guard !flow.isPaused else { return }
            let err = rd_kafka_resume_partitions(rk, list)
            if err != RD_KAFKA_RESP_ERR_NO_ERROR { logger.warning("kafka consumer: \(KafkaError(err, context: "resume \(partition)"))") }
            logger.debug("kafka consumer: released \(partition)\(refetchFrom.map { ", fetched again from offset \($0)" } ?? "")")
        }
    }
}
