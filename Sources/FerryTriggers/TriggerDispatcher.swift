import FerryKafka
import Foundation
import Logging
import Synchronization
import Metrics

/// Consumes `<prefix>.events` in its own consumer group and invokes the
/// triggers each event matches, with Lambda's asynchronous-invocation
/// semantics: retries with backoff, then an invocation record on
/// `<prefix>.triggers.dlq`. An offset is committed once every trigger of its
/// message has succeeded or been dead-lettered, so delivery is at-least-once.
public final class TriggerDispatcher: Sendable {
    private let registry: TriggerRegistry
    private let environment: TriggerEnvironment
    private let topics: Topics
    private let consumer: KafkaConsumer
    private let producer: KafkaProducer
    private let logger: Logger

    public init(registry: TriggerRegistry, environment: TriggerEnvironment, topics: Topics,
                kafka: KafkaConfiguration, producer: KafkaProducer, logger: Logger) throws(KafkaError) {
        var configuration = kafka
        configuration["group.id"] = topics.triggerGroup
        // Events are small; a deep buffer keeps the consumer from pausing and
        // refetching (a 64-message buffer capped dispatch at ~66 events/s, measured).
        self.consumer = try KafkaConsumer(configuration: configuration, subscribing: [topics.events], bufferCapacity: 2048,
                                          logger: logger)
        self.registry = registry
        self.environment = environment
        self.topics = topics
        self.producer = producer
        self.logger = logger
    }

    /// Dispatches until the task is cancelled; the event being dispatched then
    /// finishes and is committed before the consumer leaves its group.
    public func run() async {
        await withTaskCancellationHandler {
            // Events are dispatched one by one, so the last one done per partition
            // is committable; commits go out every 100 ms rather than per event.
            let done = DispatchedOffsets()
            let committer = Task { [self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(100))
                    await commit(done.take())
                }
            }
            for await message in consumer {
                // Interrupted by shutdown: leave it uncommitted, it is delivered again.
                guard await dispatch(message) else { break }
                done.mark(message)
            }
            committer.cancel()
            await commit(done.take())
            consumer.close()
        } onCancel: {
            consumer.stopFetching()
        }
    }

    private func commit(_ offsets: [TopicPartitionOffset]) async {
        guard !offsets.isEmpty else { return }
        do {
            try await consumer.commit(offsets)
        } catch {
            // Not fatal: the events are delivered again, and handlers tolerate duplicates.
            logger.warning("trigger dispatcher: commit failed: \(error)")
        }
    }

    /// Returns false when shutdown interrupted an invocation.
    func dispatch(_ message: KafkaMessage) async -> Bool {
        // S3 sends this when a notification configuration is saved: nothing to deliver.
        if let test = try? JSONSerialization.jsonObject(with: Data(message.value)) as? [String: Any],
           test["Event"] as? String == "s3:TestEvent" {
            logger.info("s3:TestEvent received and skipped", metadata: ["bucket": "\(test["Bucket"] ?? "-")"])
            return true
        }
        let event: S3Event
        do {
            event = try JSONDecoder().decode(S3Event.self, from: Data(message.value))
        } catch {
            logger.error("undecodable event dead-lettered", metadata: ["partition": "\(message.partition)", "offset": "\(message.offset)"])
            await deadLetter(InvocationRecord(requestId: UUID().uuidString, triggerName: "-", condition: "UndecodableEvent",
                                              invokeCount: 0, payload: .raw(String(decoding: message.value, as: UTF8.self)),
                                              error: error), key: message.key)
            return true
        }
        for trigger in registry.s3Triggers {
            let records = event.records.filter(trigger.matches)
            guard !records.isEmpty else { continue }
            guard await invoke(trigger, with: S3Event(records: records), key: message.key) else { return false }
        }
        return true
    }

    /// One asynchronous invocation: first try plus retries, then the DLQ.
    /// Returns false when shutdown interrupted it.
    func invoke(_ trigger: S3TriggerRegistration, with event: S3Event, key: [UInt8]?) async -> Bool {
        let delivery = trigger.delivery
        let requestId = UUID().uuidString
        var lastError: any Error = CancellationError()
        for attempt in 1...(1 + delivery.maximumRetryAttempts) {
            var log = logger
            log[metadataKey: "trigger"] = "\(trigger.name)"
            log[metadataKey: "requestId"] = "\(requestId)"
            log[metadataKey: "attempt"] = "\(attempt)"
            let context = TriggerContext(requestId: requestId, handlerName: trigger.name, attempt: attempt,
                                         deadline: Date().addingTimeInterval(delivery.timeoutSeconds),
                                         logger: log, environment: environment)
            do {
                try await withDeadline(seconds: delivery.timeoutSeconds) {
                    try await trigger.handler.handle(event, context: context)
                }
                Counter(label: "ferry_trigger_invocations_total", dimensions: [("handler", trigger.name), ("outcome", "success")]).increment()
                if let age = event.records.first.flatMap({ Timestamp.parse($0.eventTime) }).map({ Date().timeIntervalSince($0) }) {
                    Timer(label: "ferry_trigger_event_age_seconds", dimensions: [("handler", trigger.name)])
                        .record(duration: .milliseconds(Int64(max(0, age) * 1000)))
                }
                return true
            } catch {
                if Task.isCancelled { return false }
                Counter(label: "ferry_trigger_invocations_total", dimensions: [("handler", trigger.name), ("outcome", "failure")]).increment()
                lastError = error
                log.warning("trigger invocation failed: \(error)")
                if attempt <= delivery.maximumRetryAttempts {
                    let wait = delivery.retryDelaySeconds * Double(1 << (attempt - 1))
                    try? await Task.sleep(for: .seconds(wait))
                }
            }
        }
        logger.error("trigger retries exhausted; invocation record sent to \(topics.triggersDLQ)",
                     metadata: ["trigger": "\(trigger.name)", "requestId": "\(requestId)"])
        await deadLetter(InvocationRecord(requestId: requestId, triggerName: trigger.name, condition: "RetriesExhausted",
                                          invokeCount: 1 + delivery.maximumRetryAttempts, payload: .s3(event),
                                          error: lastError), key: key)
        return true
    }

    private func deadLetter(_ record: InvocationRecord, key: [UInt8]?) async {
        Counter(label: "ferry_dlq_messages_total", dimensions: [("topic", topics.triggersDLQ)]).increment()
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            try await producer.send(topic: topics.triggersDLQ, key: key, value: Array(try encoder.encode(record)))
        } catch {
            logger.critical("cannot write invocation record to \(topics.triggersDLQ): \(error)")
        }
    }
}

/// The error of an invocation that ran past its deadline.
public struct TriggerTimeout: Error, CustomStringConvertible {
    public var seconds: Double
    public var description: String { "handler timed out after \(seconds) s" }
}

/// Runs `body`, cancelling it and throwing `TriggerTimeout` after `seconds`.
func withDeadline(seconds: Double, _ body: @escaping @Sendable () async throws -> Void) async throws {
    try await withThrowingTaskGroup(of: Bool.self) { group in
        group.addTask { try await body(); return true }
        group.addTask { try await Task.sleep(for: .seconds(seconds)); return false }
        let finished = try await group.next()!
        group.cancelAll()
        if !finished { throw TriggerTimeout(seconds: seconds) }
    }
}

/// The next offset to commit per partition, as events finish.
final class DispatchedOffsets: Sendable {
    private let next = Mutex<[String: TopicPartitionOffset]>([:])

    func mark(_ message: KafkaMessage) {
        next.withLock { $0["\(message.topic)/\(message.partition)"] = TopicPartitionOffset(topic: message.topic, partition: message.partition,
                                                                                          offset: message.offset + 1) }
    }

    func take() -> [TopicPartitionOffset] {
        next.withLock { pending in defer { pending = [:] }; return Array(pending.values) }
    }
}
