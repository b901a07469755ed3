import CRdKafka
import Logging

/// librdkafka's mock cluster, in process: real Kafka wire protocol on loopback
/// ports, consumer groups and offset commits, no durability. Other clients
/// (kcat, other processes) reach it through `bootstrapServers`.
public final class EmbeddedKafkaCluster: Sendable {
    private let handle: KafkaHandle
    private nonisolated(unsafe) let cluster: OpaquePointer
    /// e.g. `127.0.0.1:39211,127.0.0.1:41533,127.0.0.1:35093`.
    public let bootstrapServers: String

    public init(brokers: Int = 3, logger: Logger) throws(KafkaError) {
        // The mock cluster needs an rd_kafka_t for bookkeeping; a bare producer will do.
        let conf = try KafkaConfiguration(bootstrapServers: "", ["log_level": "3"]).makeNative()
        handle = try KafkaHandle(type: RD_KAFKA_PRODUCER, conf: conf, logger: logger)
        guard let cluster = rd_kafka_mock_cluster_new(handle.rk, Int32(brokers)) else {
            throw KafkaError(name: "MockCluster", message: "rd_kafka_mock_cluster_new failed")
        }
        self.cluster = cluster
        bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(cluster))
    }

    /// Creates a topic (the mock broker answers no CreateTopics request).
    public func createTopic(_ name: String, partitions: Int = 4, replicationFactor: Int = 1) throws(KafkaError) {
        let err = rd_kafka_mock_topic_create(cluster, name, Int32(partitions), Int32(replicationFactor))
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err, context: "create topic \(name)") }
    }

    // MARK: Fault injection (tests, chaos drills)

    /// Kafka API keys whose requests can be made to fail.
    public enum API: Int16, Sendable {
        case produce = 0, fetch = 1, listOffsets = 2, metadata = 3, offsetCommit = 8, offsetFetch = 9,
             findCoordinator = 10, joinGroup = 11, heartbeat = 12, syncGroup = 14
    }

    /// Kafka error codes to answer with.
    public enum BrokerError: Int32, Sendable {
        case notLeaderForPartition = 6, requestTimedOut = 7, networkException = 13,
             coordinatorLoadInProgress = 14, coordinatorNotAvailable = 15, notCoordinator = 16,
             notEnoughReplicas = 19, rebalanceInProgress = 27
    }

    /// The next requests of `api` (to any broker) fail with `errors`, one each, in order.
    public func failNextRequests(_ api: API, with errors: [BrokerError]) {
        let codes = errors.map { rd_kafka_resp_err_t(rawValue: $0.rawValue) }
        codes.withUnsafeBufferPointer { rd_kafka_mock_push_request_errors_array(cluster, api.rawValue, codes.count, $0.baseAddress) }
    }

    /// Takes a broker (1-based id) off the network, or brings it back.
    public func setBroker(_ id: Int32, up: Bool) {
        _ = up ? rd_kafka_mock_broker_set_up(cluster, id) : rd_kafka_mock_broker_set_down(cluster, id)
    }

    deinit { rd_kafka_mock_cluster_destroy(cluster) }
}
