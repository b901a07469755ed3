import FerryCore
import FerryKafka
import Foundation
import Logging

/// Writes a worker's statuses, S3 events and dead letters to Kafka as JSON.
struct OutcomePublisher: Sendable {
    let producer: KafkaProducer
    let topics: Topics
    let logger: Logger

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }()

    /// Publishes a status and waits until Kafka has it.
    func publish(_ status: TransferStatus) async throws(KafkaError) {
        try await producer.send(topic: topics.status, key: status.id, value: Self.encoded(status))
    }

    /// Queues a progress status without waiting; it is dropped, with a log line, if Kafka refuses it.
    func post(_ status: TransferStatus) {
        let logger = self.logger
        producer.post(topic: topics.status, key: Array(status.id.utf8), value: Self.encoded(status)) { result in
            if case .failure(let error) = result { logger.debug("progress status not delivered: \(error)") }
        }
    }

    /// Publishes an S3 event keyed by `bucket/key`.
    func publish(_ event: S3Event, bucket: String, key: String) async throws(KafkaError) {
        try await producer.send(topic: topics.events, key: "\(bucket)/\(key)", value: Self.encoded(event))
    }

    /// Copies a request that cannot run to the DLQ: its original key and bytes
    /// (secrets such as `auth` tokens and SSE-C keys replaced in place, named in
    /// `ferry-redacted`), plus the reason in headers.
    func deadLetter(_ message: KafkaMessage, error: FerryError) async throws(KafkaError) {
        let redacted = SecretRedaction.redact(message.value)
        var headers = [
            (DLQHeader.errorCode, error.code.rawValue),
            (DLQHeader.errorMessage, error.message),
            (DLQHeader.sourcePartition, String(message.partition)),
            (DLQHeader.sourceOffset, String(message.offset)),
        ]
        if !redacted.fields.isEmpty { headers.append((DLQHeader.redacted, redacted.fields.joined(separator: ","))) }
        try await producer.send(topic: topics.requestsDLQ, key: message.key, value: redacted.bytes, headers: headers)
    }

    /// Retries `body` until it succeeds (Kafka may be briefly unavailable) or
    /// the task is cancelled. Returns whether it succeeded.
    func durably(_ what: String, _ body: () async throws(KafkaError) -> Void) async -> Bool {
        var delay = 0.1
        while !Task.isCancelled {
            do {
                try await body()
                return true
            } catch {
                logger.warning("\(what) not published, retrying in \(delay) s: \(error)")
                try? await Task.sleep(for: .seconds(delay))
                delay = min(delay * 2, 5)
            }
        }
        return false
    }

    private static func encoded<T: Encodable>(_ value: T) -> [UInt8] {
        // Encoding our own value types cannot fail.
        Array(try! encoder.encode(value))
    }
}
