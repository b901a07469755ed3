import CRdKafka
import FerryCore

/// librdkafka properties (see its CONFIGURATION.md), passed through unchanged,
/// so any security setting (SASL_SSL, SCRAM, mTLS) works from configuration.
public struct KafkaConfiguration: Sendable {
    public var properties: [String: String]

    /// Whether the cluster deletes nothing by time, so that a consumer group
    /// with no committed offset of a partition was meant to read it from
    /// offset 0, and anything below the log's start was deleted unread: true
    /// for the embedded cluster (`EmbeddedKafkaCluster.groupConfiguration`
    /// sets it), whose only deletion is its size cap. Not a librdkafka property.
    public var unreadStartsAtZero = false

    public init(bootstrapServers: String, _ properties: [String: String] = [:]) {
        self.properties = properties
        self.properties["bootstrap.servers"] = bootstrapServers
    }

    public subscript(key: String) -> String? {
        get { properties[key] }
        set { properties[key] = newValue }
    }

    /// For a consumer of a topic that is mostly quiet (control decisions,
    /// callbacks), where a quarter second more before a message is seen costs
    /// nothing: its fetches wait 250 ms instead of `KafkaConsumer`'s 25 ms,
    /// unless the operator set `fetch.wait.max.ms`. A real broker answers a
    /// fetch as soon as data arrives, so there it changes nothing; the
    /// embedded mock cluster answers at the end of the wait, and each idle
    /// consumer woke 40 times a second per broker (about 120 wakeups a second
    /// each, measured on an idle worker).
    public func forQuietTopic() -> KafkaConfiguration {
        var configuration = self
        if configuration["fetch.wait.max.ms"] == nil { configuration["fetch.wait.max.ms"] = "250" }
        return configuration
    }

    /// For a producer: `message.timeout.ms` (how long librdkafka tries to
    /// deliver a message before failing it; 5 minutes by default) set to
    /// `timeout` unless the operator set it, clamped to 1 s…2^31−1 ms: no
    /// duration given can trap, and librdkafka refuses a timeout that is not
    /// above the producer's `linger.ms`.
    public func withDeliveryTimeout(_ timeout: Duration) -> KafkaConfiguration {
        var configuration = self
        if configuration["message.timeout.ms"] == nil {
            configuration["message.timeout.ms"] = "\((timeout.inSeconds * 1000).clampedInt(1000...Int(Int32.max)))"
        }
        return configuration
    }

    /// The kind of handle a configuration object is made for.
    enum HandleKind { case producer, consumer }

    /// What librdkafka's CONFIGURATION.md (2.0) marks as read by producers only
    /// (`P`) and by consumers only (`C`). One property list (`--kafka-property`,
    /// `kafka.properties`) serves all of a process's handles, and librdkafka warns
    /// on each handle about a property only the other kind reads (`compression.type
    /// is a producer property and will be ignored by this consumer instance`):
    /// each kind is given only what it can read. Anything else goes to both.
    static let producerOnly: Set<String> = [
        "acks", "batch.num.messages", "batch.size", "compression.codec", "compression.level", "compression.type",
        "delivery.report.only.error", "delivery.timeout.ms", "dr_cb", "dr_msg_cb", "enable.gapless.guarantee", "enable.idempotence",
        "linger.ms", "message.send.max.retries", "message.timeout.ms", "msg_order_cmp", "partitioner", "partitioner_cb",
        "produce.offset.report", "queue.buffering.backpressure.threshold", "queue.buffering.max.kbytes", "queue.buffering.max.messages",
        "queue.buffering.max.ms", "queuing.strategy", "request.required.acks", "request.timeout.ms", "retries", "retry.backoff.ms",
        "sticky.partitioning.linger.ms", "transaction.timeout.ms", "transactional.id",
    ]
    static let consumerOnly: Set<String> = [
        "auto.commit.enable", "auto.commit.interval.ms", "auto.offset.reset", "check.crcs", "consume.callback.max.messages", "consume_cb",
        "coordinator.query.interval.ms", "enable.auto.commit", "enable.auto.offset.store", "enable.partition.eof", "fetch.error.backoff.ms",
        "fetch.max.bytes", "fetch.message.max.bytes", "fetch.min.bytes", "fetch.wait.max.ms", "group.id", "group.instance.id",
        "group.protocol.type", "heartbeat.interval.ms", "isolation.level", "max.partition.fetch.bytes", "max.poll.interval.ms",
        "offset.store.method", "offset.store.path", "offset.store.sync.interval.ms", "offset_commit_cb", "partition.assignment.strategy",
        "queued.max.messages.kbytes", "queued.min.messages", "rebalance_cb", "session.timeout.ms",
    ]

    /// A new librdkafka configuration object for a `kind` handle; the caller owns it.
    func makeNative(for kind: HandleKind) throws(KafkaError) -> OpaquePointer {
        let conf = rd_kafka_conf_new()!
        var errorText = [CChar](repeating: 0, count: 512)
        let otherKinds = kind == .producer ? Self.consumerOnly : Self.producerOnly
        for (key, value) in properties.sorted(by: { $0.key < $1.key }) where !otherKinds.contains(key) {
            if rd_kafka_conf_set(conf, key, value, &errorText, errorText.count) != RD_KAFKA_CONF_OK {
                rd_kafka_conf_destroy(conf)
                throw KafkaError(name: "InvalidConfiguration",
                                 message: String(cBuffer: errorText))
            }
        }
        return conf
    }
}
