import FerryCore
import FerryKafka
import FerryStore
import Foundation
import Logging

/// Turns a worker's statuses, S3 events and dead letters into Kafka messages
/// (JSON) for the outbox; progress statuses, which may be lost, go straight to Kafka.
struct OutcomePublisher: Sendable {
    let producer: KafkaProducer
    let topics: Topics
    let logger: Logger
    /// The largest dead letter the broker takes (`DeadLetterRecord.maxBytes`).
    var deadLetterMaxBytes = DeadLetterRecord.defaultMaxBytes


    /// A status, keyed by transfer id.
    func message(_ status: TransferStatus) -> OutboxMessage {
        OutboxMessage(topic: topics.status, key: Array(status.id.utf8), value: Self.encoded(status))
    }

    /// The deliveries of a terminal status to the request's callback: onto its
    /// reply topic directly, or onto `<prefix>.callbacks` for the
    /// `CallbackDispatcher` to POST. They ride the outbox with the outcome, so
    /// each outcome is delivered once (a crash between Kafka's acknowledgement
    /// and the outbox's delete can repeat it, with the same id and state).
    func callbackMessages(_ status: TransferStatus, callback: String?) -> [OutboxMessage] {
        guard let callback, let target = try? CompletionCallback(callback) else { return [] }
        let headers = [OutboxMessage.Header(CallbackHeader.transferId, status.id), OutboxMessage.Header(CallbackHeader.state, status.state.rawValue)]
        switch target {
        case .kafka(let topic):
            return [OutboxMessage(topic: topic, key: Array(status.id.utf8), value: Self.encoded(status), headers: headers)]
        case .https(let url):
            let delivery = CallbackDelivery(url: url, status: status)
            return [OutboxMessage(topic: topics.callbacks, key: Array(status.id.utf8), value: Self.encoded(delivery), headers: headers)]
        }
    }

    /// An S3 event, keyed by `bucket/key`.
    func message(_ event: S3Event, bucket: String, key: String) -> OutboxMessage {
        OutboxMessage(topic: topics.events, key: Array("\(bucket)/\(key)".utf8), value: Self.encoded(event))
    }

    /// A request that cannot run, for the DLQ: its original key and bytes
    /// (secrets such as `auth` tokens and SSE-C keys replaced in place, named in
    /// `ferry-redacted`), plus the reason in headers; cut to fit the broker's
    /// limit when needed (`DeadLetterRecord`). `extra` headers are appended.
    func deadLetter(_ message: KafkaMessage, error: FerryError, extra: [OutboxMessage.Header] = []) -> OutboxMessage {
        let redacted = SecretRedaction.redact(message.value)
        var headers = [
            OutboxMessage.Header(DLQHeader.errorCode, error.code.rawValue),
            OutboxMessage.Header(DLQHeader.errorMessage, error.message),
            OutboxMessage.Header(DLQHeader.sourcePartition, String(message.partition)),
            OutboxMessage.Header(DLQHeader.sourceOffset, String(message.offset)),
        ]
        if !redacted.fields.isEmpty { headers.append(.init(DLQHeader.redacted, redacted.fields.joined(separator: ","))) }
        return DeadLetterRecord.make(topic: topics.requestsDLQ, key: message.key, value: redacted.bytes,
                                     headers: headers + extra, maxBytes: deadLetterMaxBytes)
    }

    /// A dead letter that carries none of the message's bytes, only their
    /// length and SHA-256 (`ferry-original-length`, `ferry-original-sha256`,
    /// `ferry-truncated: true`): for a message whose quarantine itself failed,
    /// so nothing of it is parsed again.
    func withheldDeadLetter(_ message: KafkaMessage, error: FerryError, extra: [OutboxMessage.Header] = []) -> OutboxMessage {
        let headers = [
            OutboxMessage.Header(DLQHeader.errorCode, error.code.rawValue),
            OutboxMessage.Header(DLQHeader.errorMessage, error.message + "; the message's bytes are withheld (length and SHA-256 in headers)"),
            OutboxMessage.Header(DLQHeader.sourcePartition, String(message.partition)),
            OutboxMessage.Header(DLQHeader.sourceOffset, String(message.offset)),
        ] + extra
        let full = DeadLetterRecord.make(topic: topics.requestsDLQ, key: message.key, value: message.value, headers: headers,
                                         maxBytes: deadLetterMaxBytes)
        return DeadLetterRecord.shrunk(full, toAtMost: 0)
    }

    /// Publishes a status and waits for Kafka's acknowledgement; false when it was refused.
    func sendNow(_ status: TransferStatus) async -> Bool {
        do {
            try await producer.send(topic: topics.status, key: Array(status.id.utf8), value: Self.encoded(status))
            return true
        } catch {
            logger.warning("status not published at once, going through the outbox: \(error)")
            return false
        }
    }

    /// Queues a progress status without waiting; it is dropped, with a log line, if Kafka refuses it.
    func post(_ status: TransferStatus) {
        let logger = self.logger
        producer.post(topic: topics.status, key: Array(status.id.utf8), value: Self.encoded(status)) { result in
            if case .failure(let error) = result { logger.debug("progress status not delivered: \(error)") }
        }
    }

    private static func encoded<T: Encodable>(_ value: T) -> [UInt8] {
        // Encoding our own value types cannot fail.
        try! FerryJSON.encode(value)
    }
}
