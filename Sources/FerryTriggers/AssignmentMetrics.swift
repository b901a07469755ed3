import FerryCore
import FerryTriggerKit
import FerryKafka
import Metrics

/// `ferry_consumer_assigned_partitions{group}` and
/// `ferry_consumer_rebalances_total{group}` of one group consumer, sampled by
/// its owner's periodic loop: the transfer worker's and each trigger group's.
/// (It lives here because this is the lowest module with both Kafka and Metrics.)
public struct AssignmentMetrics: Sendable {
    public let group: String
    private var rebalancesReported = 0

    public init(group: String) { self.group = group }

    /// Records the consumer's assignment now and the rebalances since the last call.
    public mutating func sample(_ consumer: KafkaConsumer) {
        let (partitions, rebalances) = consumer.assignment
        Gauge(label: "ferry_consumer_assigned_partitions", dimensions: [("group", group)]).record(partitions)
        if rebalances > rebalancesReported {
            Counter(label: "ferry_consumer_rebalances_total", dimensions: [("group", group)]).increment(by: rebalances - rebalancesReported)
            rebalancesReported = rebalances
        }
    }

    /// Once the consumer has left its group: it holds nothing.
    public func stopped() {
        Gauge(label: "ferry_consumer_assigned_partitions", dimensions: [("group", group)]).record(0)
    }
}
