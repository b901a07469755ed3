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

extension KafkaError {
    /// Errors that retrying the same message cannot mend: it is too large for
    /// the producer or the broker, or the broker refuses its contents. Anything
    /// else (timeouts, leaders moving, brokers down, authorisation) may pass.
    public var isPermanentForMessage: Bool {
        let bare = name.hasPrefix("_") ? String(name.dropFirst()) : name
        return ["MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_RECORD", "CORRUPT_MESSAGE", "INVALID_MSG",
                "INVALID_MSG_SIZE", "INVALID_REQUIRED_ACKS"].contains(bare)
    }

    /// A message whose delivery report did not come within the caller's deadline.
    public static func deliveryTimedOut(_ seconds: Double) -> KafkaError {
        KafkaError(name: "_DELIVERY_WAIT_TIMED_OUT", message: "no delivery report within \(seconds) s")
    }
}
