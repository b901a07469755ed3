import CRdKafka

/// An error reported by librdkafka, with its name (e.g. `_MSG_TIMED_OUT`) and text.
public struct KafkaError: Error, Sendable, CustomStringConvertible {
    public var name: String
    public var message: String

    public init(name: String, message: String) { self.name = name; self.message = message }

    init(_ code: rd_kafka_resp_err_t, context: String) {
        name = String(cString: rd_kafka_err2name(code))
        message = "\(context): \(String(cString: rd_kafka_err2str(code)))"
    }

    public var description: String { "\(message) [\(name)]" }
}
