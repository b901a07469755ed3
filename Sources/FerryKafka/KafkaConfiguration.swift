import CRdKafka

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
