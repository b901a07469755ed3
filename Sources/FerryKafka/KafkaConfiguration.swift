import CRdKafka
import FerryCore

/// librdkafka properties (see its CONFIGURATION.md), passed through unchanged,
/// so any security setting (SASL_SSL, SCRAM, mTLS) works from configuration.
public struct KafkaConfiguration: Sendable {
    public var properties: [String: String]

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

    /// A new librdkafka configuration object; the caller owns it.
    func makeNative() throws(KafkaError) -> OpaquePointer {
        let conf = rd_kafka_conf_new()!
        var errorText = [CChar](repeating: 0, count: 512)
        for (key, value) in properties.sorted(by: { $0.key < $1.key }) {
            if rd_kafka_conf_set(conf, key, value, &errorText, errorText.count) != RD_KAFKA_CONF_OK {
                rd_kafka_conf_destroy(conf)
                throw KafkaError(name: "InvalidConfiguration",
                                 message: String(decoding: errorText.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
        }
        return conf
    }
}
