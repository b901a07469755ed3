import FerryTriggerKit
import FerryCore
import FerryKafka
import Foundation
import Synchronization
import Logging
import Metrics
import FerryConcurrency

/// What both kinds of delivery share: the context a handler gets (with its
/// loop-guarded transfer client), per-handler concurrency limits, deadlines,
/// and writing failure records to Kafka.
struct TriggerServices: Sendable {
    let environment: TriggerEnvironment
    let topics: Topics
    let producer: KafkaProducer?
    let logger: Logger
    private let limits: [String: AsyncSemaphore]

    init(registry: TriggerRegistry, environment: TriggerEnvironment, topics: Topics, producer: KafkaProducer?, logger: Logger) {
        self.environment = environment; self.topics = topics; self.producer = producer; self.logger = logger
        var limits: [String: AsyncSemaphore] = [:]
        for trigger in registry.s3Triggers { if let n = trigger.delivery.maximumConcurrency { limits[trigger.name] = AsyncSemaphore(limit: n) } }
        for trigger in registry.streamTriggers { if let n = trigger.mapping.maximumConcurrency { limits[trigger.name] = AsyncSemaphore(limit: n) } }
        self.limits = limits
    }

    func context(handler: String, requestId: String, attempt: Int, timeout: Double, logger log: Logger,
                 triggersCaller: @escaping @Sendable (String, String, String) -> Bool) -> TriggerContext {
        let producer = self.producer
        let requests = topics.requests
        let transfers = TriggerTransfers(handlerName: handler, resolver: environment.prefixResolver,
                                         triggersCaller: triggersCaller) { request in
            guard let producer else { throw TriggerRegistrationError("no Kafka producer in this process") }
            try await producer.send(topic: requests, key: request.kafkaKey, value: try FerryJSON.encode(request))
        }
        return TriggerContext(requestId: requestId, handlerName: handler, attempt: attempt,
                              deadline: .now + .seconds(timeout), logger: log, environment: environment,
                              transfers: transfers, messages: producer.map { ProducerMessageSender(producer: $0) })
    }

    /// Runs `body` within the handler's concurrency limit and its timeout.
    func invoke<T: Sendable>(_ handler: String, timeout: Double, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let limit = limits[handler]
        await limit?.acquire()
        defer { limit?.release() }
        return try await withDeadline(seconds: timeout, body)
    }

    /// Writes a failure record; a write Kafka refuses for a while is retried
    /// until it lands or the dispatcher stops (false), so an offset is never
    /// committed past a lost record. A record too large for Kafka is written
    /// without its payload (`FailureRecord`); one Kafka refuses even so is
    /// logged with its reason and dropped, rather than holding the partition.
    func deadLetter<T: FailureRecord>(_ record: T, topic: String, key: [UInt8]?) async -> Bool {
        Counter(label: "ferry_dlq_messages_total", dimensions: [("topic", topic)]).increment()
        guard let producer, var value = try? FerryJSON.encode(record) else { return false }
        var shrunk = false
        func shrink(_ reason: String) {
            let omitted = FailureRecordFit.omitted(Array(value), reason: reason)
            logger.warning("failure record for \(topic) is \(value.count) bytes: written without its payload (\(reason))")
            if let smaller = try? FerryJSON.encode(record.omittingPayload(omitted)) { value = smaller }
            shrunk = true
        }
        if value.count > FailureRecordFit.maxBytes { shrink("larger than \(FailureRecordFit.maxBytes) bytes") }
        let written: Void? = await Backoff.kafkaRecord.untilSuccess(failed: { error, retry in
            logger.error("cannot write failure record to \(topic), retry \(retry): \(error)")
        }) {
            // A refusal for good is answered at once: first by the record without
            // its payload, then by dropping it with its reason. Anything else is retried.
            while true {
                do {
                    return try await producer.send(topic: topic, key: key, value: value)
                } catch let error as KafkaError where error.isPermanentForMessage {
                    guard shrunk else { shrink("Kafka refused it: \(error)"); continue }
                    logger.error("failure record for \(topic) dropped: Kafka refuses it even without its payload: \(error)")
                    Counter(label: "ferry_dlq_dropped_total", dimensions: [("topic", topic)]).increment()
                    return
                }
            }
        }
        return written != nil
    }
}

/// The error of an invocation that ran past its deadline.
public struct TriggerTimeout: Error, CustomStringConvertible {
    public var seconds: Double
    public var description: String { "handler timed out after \(seconds) s" }
}

/// Runs `body`, cancelling it and throwing `TriggerTimeout` after `seconds`.
/// The deadline is a dispatch timer that is freed when `body` ends first (a
/// cancelled `Task.sleep` would hold its timer for the whole timeout).
func withDeadline<T: Sendable>(seconds: Double, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let timedOut = Atomic<Bool>(false)
    let work = Task { try await body() }
    let timer = DeadlineTimer.start(after: seconds) {
        timedOut.store(true, ordering: .releasing)
        work.cancel()
    }
    defer { timer.cancel() }
    let result = await withTaskCancellationHandler { await work.result } onCancel: { work.cancel() }
    if timedOut.load(ordering: .acquiring) { throw TriggerTimeout(seconds: seconds) }
    return try result.get()
}
