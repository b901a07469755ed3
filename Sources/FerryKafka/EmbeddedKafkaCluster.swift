import CRdKafka
import FerryCore
import Logging
import FerryConcurrency

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
        // Its brokers' sockets take this handle's socket settings: without
        // TCP_NODELAY a producer's pipelined requests (one per partition) got
        // their responses 44 ms late, Nagle's algorithm holding each small
        // response for the client's delayed ACK (a real broker disables Nagle).
        let conf = try KafkaConfiguration(bootstrapServers: "", ["log_level": "3", "socket.nagle.disable": "true"]).makeNative(for: .producer)
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

    /// Makes broker `id` the coordinator of consumer group `group` (the mock
    /// otherwise picks one by hashing the name), so that a test knows which
    /// broker's outage is the coordinator's.
    public func setGroupCoordinator(_ group: String, broker id: Int32) throws(KafkaError) {
        let err = rd_kafka_mock_coordinator_set(cluster, "group", group, id)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err, context: "coordinator of \(group)") }
    }

    /// Takes a broker (1-based id) off the network, or brings it back. Never
    /// while a child process is being spawned (see `SpawnLock`): the mock
    /// rebinds the broker's port on the way down and aborts if it cannot.
    public func setBroker(_ id: Int32, up: Bool) {
        SpawnLock.holding {
            _ = up ? rd_kafka_mock_broker_set_up(cluster, id) : rd_kafka_mock_broker_set_down(cluster, id)
        }
    }

    deinit { rd_kafka_mock_cluster_destroy(cluster) }

    /// Whether a cluster id is the embedded cluster's: librdkafka's mock
    /// cluster names itself `mockCluster<hex>`.
    public static func isEmbedded(clusterId: String) -> Bool { clusterId.hasPrefix("mockCluster") }

    /// The session timeout a consumer group on the embedded cluster should use.
    /// Its coordinator holds every rebalance after the first for the session
    /// timeout less one second, even when every member has rejoined (a real
    /// broker ends it then), and a cooperative-sticky join takes two: with
    /// librdkafka's default of 45 s a worker added to a busy fleet measured
    /// 89 s before its first request (S7), with 6 s about 11 s.
    public static let groupSessionTimeoutMs = 6000

    /// How often a member on the embedded cluster tells its coordinator it is
    /// alive. The mock names a member by its memory address, and an address
    /// freed when a live member's session expires is soon another member's:
    /// the first member, joining again under its old id while the new one's
    /// join is pending, makes the mock abort the process
    /// (`rdkafka_mock_cgrp.c:567`; reproduced with six consumers and 7 s
    /// coordinator outages, the seventh outage). librdkafka's default of 3 s
    /// left a member 3 s of delay before the 6 s session ran out; at 1 s, 5.
    public static let groupHeartbeatIntervalMs = 1000

    /// `configuration` for a consumer group member on the cluster named
    /// `clusterId`: on the embedded cluster, `unreadStartsAtZero`, and
    /// `groupSessionTimeoutMs` and `groupHeartbeatIntervalMs` unless the
    /// session timeout is set already; elsewhere unchanged.
    public static func groupConfiguration(_ configuration: KafkaConfiguration, clusterId: String?) -> KafkaConfiguration {
        guard let clusterId, isEmbedded(clusterId: clusterId) else { return configuration }
        var tuned = configuration
        tuned.unreadStartsAtZero = true
        guard configuration["session.timeout.ms"] == nil else { return tuned }
        tuned["session.timeout.ms"] = "\(groupSessionTimeoutMs)"
        if tuned["heartbeat.interval.ms"] == nil { tuned["heartbeat.interval.ms"] = "\(groupHeartbeatIntervalMs)" }
        return tuned
    }

    /// librdkafka's mock broker keeps at most this much of each partition and
    /// drops the oldest messages beyond it (hard-coded in librdkafka; no API
    /// changes it). 2.0.2 and current releases alike.
    public static let bytesKeptPerPartition = 5 << 20

    /// About how many messages of `size` bytes (value and key) one partition
    /// keeps: each record costs its bytes and about 20 more in its batch
    /// (Kafka's record format v2), and each batch 61; 32 covers both for
    /// batches of a few records.
    public static func messagesKept(ofSize size: Int) -> Int {
        bytesKeptPerPartition / (max(0, size) + 32)
    }
}
