/// Ferry's Kafka topic names, all under one prefix (default `ferry`).
public struct Topics: Sendable, Hashable {
    public var prefix: String
    public init(prefix: String = "ferry") { self.prefix = prefix }

    public var requests: String { "\(prefix).requests" }
    public var requestsDLQ: String { "\(prefix).requests.dlq" }
    public var status: String { "\(prefix).status" }
    public var events: String { "\(prefix).events" }
    public var streams: String { "\(prefix).streams" }
    public var control: String { "\(prefix).control" }
    public var triggersDLQ: String { "\(prefix).triggers.dlq" }
    /// HTTPS completion callbacks waiting for delivery, and the ones that could not be delivered.
    public var callbacks: String { "\(prefix).callbacks" }
    public var callbacksDLQ: String { "\(prefix).callbacks.dlq" }
    /// Stores' own bucket notifications as they arrived (the ingest role's input).
    public var ingest: String { "\(prefix).ingest" }
    /// Notifications the ingest role could not confirm with the store (its HEAD
    /// kept failing), as they came, with `DLQHeader` headers naming why.
    public var ingestDLQ: String { "\(prefix).ingest.dlq" }
    /// Bytes of uploads sent through Kafka (`ChunkedSource`); its retention bounds how long they can be taken.
    public var uploads: String { "\(prefix).uploads" }

    /// Every topic Ferry reads or writes, for creating them up front.
    public var all: [String] { [requests, requestsDLQ, status, events, streams, control, triggersDLQ, callbacks, callbacksDLQ, uploads, ingest, ingestDLQ] }

    /// The consumer group of notification ingest.
    public var ingestGroup: String { "\(prefix)-ingest" }
    /// The consumer group of callback deliveries.
    public var callbackGroup: String { "\(prefix)-callbacks" }

    /// The consumer group of transfer workers.
    public var workerGroup: String { "\(prefix)-workers" }
    /// The consumer group of trigger dispatchers.
    public var triggerGroup: String { "\(prefix)-triggers" }
}

/// Header names on `<prefix>.requests.dlq` records.
public enum DLQHeader {
    public static let errorCode = "ferry-error-code"
    public static let errorMessage = "ferry-error-message"
    public static let sourcePartition = "ferry-source-partition"
    public static let sourceOffset = "ferry-source-offset"
    /// Fields whose secret values were replaced by `<redacted>`.
    public static let redacted = "ferry-redacted"
    /// `true` when the value was cut to fit the broker's message limit; the two
    /// headers after it describe the whole (redacted) value.
    public static let truncated = "ferry-truncated"
    public static let originalLength = "ferry-original-length"
    /// Hex SHA-256 of the whole (redacted) value.
    public static let originalSHA256 = "ferry-original-sha256"
    /// Set when the message key was cut to 4096 bytes.
    public static let originalKeyLength = "ferry-original-key-length"
    public static let originalKeySHA256 = "ferry-original-key-sha256"
    /// On `PoisonMessage` records: how many times the message was started without an outcome.
    public static let starts = "ferry-starts"
    /// On `<prefix>.ingest.dlq` records: the topic the notification was read from.
    public static let sourceTopic = "ferry-source-topic"
}
