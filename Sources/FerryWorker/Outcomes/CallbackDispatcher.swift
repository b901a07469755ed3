import FerryCore
import FerryKafka
import FerryS3
import FerryStorage
import FerryStore
import Foundation
import Logging
import Metrics
import FerryConcurrency

/// Delivers HTTPS completion callbacks from `<prefix>.callbacks` (group
/// `<prefix>-callbacks`, shared by the fleet): each terminal status is POSTed
/// as JSON with an HMAC signature, under the callback SSRF policy, tried up
/// to `maxAttempts` times with backoff; one that cannot be delivered (the
/// endpoint refuses, or is unreachable every time) becomes a record on
/// `<prefix>.callbacks.dlq`. An offset is committed once its delivery has an
/// outcome, so a worker that stops mid-delivery leaves it to the next one
/// (the receiver may see it twice: `ferry-delivery` names it).
final class CallbackDispatcher: Sendable {
    private let consumer: KafkaConsumer
    private let producer: KafkaProducer
    private let http: CurlTransport
    private let settings: CallbackSettings
    private let topics: Topics
    /// The largest dead letter Kafka takes from this worker's producer (as for `<prefix>.requests.dlq`).
    private let deadLetterMaxBytes: Int
    private let logger: Logger

    init(configuration: WorkerConfiguration, producer: KafkaProducer, logger: Logger) throws(KafkaError) {
        var kafka = configuration.kafka.forQuietTopic()
        kafka["group.id"] = configuration.topics.callbackGroup
        kafka["auto.offset.reset"] = "earliest"
        consumer = try KafkaConsumer(configuration: kafka, subscribing: [configuration.topics.callbacks], logger: logger)
        self.producer = producer
        http = configuration.http
        settings = configuration.callbacks
        topics = configuration.topics
        deadLetterMaxBytes = DeadLetterRecord.maxBytes(producerProperties: configuration.kafka.properties)
        self.logger = logger
    }

    func run() async {
        await withTaskCancellationHandler {
            for await message in consumer {
                guard await deliver(message) else { break }  // stopping: left for the next owner
                try? await consumer.commit([TopicPartitionOffset(topic: message.topic, partition: message.partition,
                                                                 offset: message.offset + 1)])
            }
            await consumer.close()
        } onCancel: {
            consumer.stopFetching()
        }
    }

    /// POSTs one callback; true when it has an outcome (delivered or dead-lettered).
    func deliver(_ message: KafkaMessage) async -> Bool {
        let name = "\(message.topic)/\(message.partition)/\(message.offset)"
        guard let delivery = try? JSONDecoder().decode(CallbackDelivery.self, from: Data(message.value)) else {
            logger.error("undecodable callback delivery \(name): dead-lettered")
            return await deadLetter(message.value, id: nil, url: nil, error: FerryError(.malformedRequest, "not a callback delivery"), attempts: 0)
        }
        // The status as the status topic carries it (FerryJSON).
        let body = (try? FerryJSON.encode(delivery.status)) ?? []
        var lastError = FerryError(.internalError, "not attempted")
        var attempts = 0
        while attempts < settings.maxAttempts {
            if Task.isCancelled { return false }
            attempts += 1
            let now = Int(Date().timeIntervalSince1970)
            var request = HTTPRequest(method: "POST", url: delivery.url, headers: [
                ("content-type", "application/json"),
                (CallbackHeader.transferId, delivery.status.id),
                (CallbackHeader.state, delivery.status.state.rawValue),
                (CallbackHeader.delivery, name),
                (CallbackHeader.attempts, String(attempts)),
                (CallbackHeader.signature, CallbackSettings.signature(secret: settings.secret ?? "", body: body, time: now)),
            ], body: .bytes(body))
            request.addressPolicy = settings.policy
            do {
                let response = try await http.execute(request)
                if (200..<300).contains(response.status) {
                    logger.info("callback delivered to \(Self.redacted(delivery.url))", metadata: ["transfer": "\(delivery.status.id)", "attempts": "\(attempts)"])
                    Counter(label: "ferry_callbacks_total", dimensions: [("outcome", "delivered")]).increment()
                    return true
                }
                lastError = FerryError(.storageError, "the callback endpoint answered HTTP \(response.status)")
                // A refusal other than throttling or a timeout will not change by asking again.
                if (400..<500).contains(response.status) && response.status != 408 && response.status != 429 { break }
            } catch {
                lastError = error
                if error.code == .forbiddenSource || error.code == .invalidRequest { break }
                if error.code == .cancelled { return false }
            }
            guard attempts < settings.maxAttempts else { break }
            logger.warning("callback to \(Self.redacted(delivery.url)) failed (attempt \(attempts) of \(settings.maxAttempts)): \(lastError)",
                           metadata: ["transfer": "\(delivery.status.id)"])
            _ = await Backoff.callback.pause(beforeRetry: attempts)
        }
        logger.error("callback to \(Self.redacted(delivery.url)) not delivered after \(attempts) attempt(s): \(lastError); dead-lettered on \(topics.callbacksDLQ)",
                     metadata: ["transfer": "\(delivery.status.id)"])
        return await deadLetter(body, id: delivery.status.id, url: delivery.url, error: lastError, attempts: attempts)
    }

    private func deadLetter(_ value: [UInt8], id: String?, url: String?, error: FerryError, attempts: Int) async -> Bool {
        Counter(label: "ferry_callbacks_total", dimensions: [("outcome", "dead_lettered")]).increment()
        var headers = [(DLQHeader.errorCode, error.code.rawValue), (DLQHeader.errorMessage, String(error.message.prefix(1024))),
                       (CallbackHeader.attempts, String(attempts))]
        if let url { headers.append((CallbackHeader.url, Self.redacted(url))) }
        // Cut to what Kafka takes (a message of ferry.callbacks near the limit, plus these
        // headers, would be refused every time and hold its partition); the cut is marked.
        let record = DeadLetterRecord.make(topic: topics.callbacksDLQ, key: id.map { Array($0.utf8) }, value: value,
                                           headers: headers.map { OutboxMessage.Header($0.0, $0.1) }, maxBytes: deadLetterMaxBytes)
        let written: Void? = await Backoff.kafkaRecord.untilSuccess(failed: { error, retry in
            logger.error("cannot write the callback dead letter, retry \(retry): \(error)")
        }) {
            do {
                try await producer.send(topic: record.topic, key: record.key, value: record.value, headers: record.headers.map { ($0.name, $0.value) })
            } catch let error as KafkaError where error.isPermanentForMessage {
                logger.error("callback dead letter dropped: Kafka refuses it even cut to \(record.recordBytes) bytes: \(error)")
            }
        }
        return written != nil
    }

    /// Without its query (which may carry a token).
    static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url) else { return "<callback>" }
        if components.query != nil { components.query = "…" }
        return components.string ?? "<callback>"
    }
}
