import FerryTriggerKit
import FerryCore
import FerryKafka
import Foundation
import Logging
import Metrics
import FerryConcurrency

/// Delivers `<prefix>.events` and `<prefix>.streams` to the registered
/// triggers. S3 triggers are invoked like Lambda's asynchronous invocation
/// (consumer group `<prefix>-triggers`); each stream trigger is an event
/// source mapping with its own consumer group (`<prefix>-triggers.<name>`),
/// so its position and retries do not hold back the others. Partitions are
/// worked on side by side, each in offset order; an offset is committed once
/// its message is handled or its failure record is written: at-least-once.
public final class TriggerDispatcher: Sendable {
    private let registry: TriggerRegistry
    private let services: TriggerServices
    private let s3Lanes: PartitionLanes?
    private let mappings: [StreamMapping]
    private let logger: Logger

    /// `maxStarts`: how often an invocation may be under way when the worker
    /// stops before its messages are no longer invoked (`LaneStarts`).
    public init(registry: TriggerRegistry, environment: TriggerEnvironment, topics: Topics,
                kafka: KafkaConfiguration, producer: KafkaProducer, maxStarts: Int = 3, logger: Logger) throws(KafkaError) {
        let services = TriggerServices(registry: registry, environment: environment, topics: topics, producer: producer, logger: logger)
        self.registry = registry
        self.services = services
        self.logger = logger
        s3Lanes = registry.s3Triggers.isEmpty ? nil
            : try PartitionLanes(kafka: kafka, group: topics.triggerGroup, topics: [topics.events], maxStarts: maxStarts, logger: logger)
        var mappings: [StreamMapping] = []
        for trigger in registry.streamTriggers {
            mappings.append(try StreamMapping(trigger: trigger, services: services, kafka: kafka,
                                              group: "\(topics.triggerGroup).\(trigger.name)", maxStarts: maxStarts, logger: logger))
        }
        self.mappings = mappings
    }

    /// Dispatches until the task is cancelled; invocations under way are
    /// interrupted and left uncommitted (delivered again).
    public func run() async {
        let stopping = ShutdownSteps()
        defer {
            stopping.ended("invocations and consumers")
            logger.log(level: stopping.isSlow ? .warning : .info, "trigger dispatcher stopped in \(stopping.summary)")
        }
        await withTaskCancellationHandler {
            await runLanes()
        } onCancel: {
            stopping.begin()
        }
    }

    private func runLanes() async {
        await withTaskGroup(of: Void.self) { group in
            if let s3Lanes {
                group.addTask { [self] in
                    await s3Lanes.run { lane in
                        while case .message(let message) = await lane.messages.next() {
                            guard !lane.isRevoked, !Task.isCancelled, await self.dispatchGuarded(message, lane: lane) else {
                                lane.skipped(message)
                                continue
                            }
                            lane.done(message)
                        }
                    }
                }
            }
            for mapping in mappings { group.addTask { await mapping.run() } }
        }
    }

    /// The S3 event consumer's `OffsetLag` per partition (for tests; /metrics has it as `ferry_trigger_offset_lag`).
    var eventOffsetLag: [(TopicPartition, Int64)] { s3Lanes?.offsetLag ?? [] }

    /// The consumer of S3 events (for tests: that a stopped dispatcher frees it).
    var eventConsumer: KafkaConsumer? { s3Lanes?.consumer }

    /// Events and stream records taken from Kafka and not yet done, over all
    /// of this dispatcher's consumers (for tests and diagnostics).
    var heldMessages: Int { (s3Lanes?.heldMessages ?? 0) + mappings.reduce(0) { $0 + $1.heldMessages } }

    /// Partitions of `<prefix>.streams` each stream trigger owns here (for tests and diagnostics).
    var streamAssignments: [String: Set<TopicPartition>] {
        Dictionary(uniqueKeysWithValues: mappings.map { ($0.trigger.name, $0.assignedPartitions) })
    }

    /// `dispatch` under the crash-loop breaker (`LaneStarts`): a message that
    /// was being handled when a worker stopped runs alone in the process; one
    /// that was, `maxStarts` times, is not invoked but dead-lettered.
    private func dispatchGuarded(_ message: KafkaMessage, lane: PartitionLanes.Lane) async -> Bool {
        await lane.guarded([message], alone: await lane.isSuspect(message)) {
            await dispatch(message)
        } quarantined: { starts in
            logger.error("event not invoked: \(WorkerCrashed(starts: starts)); sent to \(services.topics.triggersDLQ)",
                         metadata: ["partition": "\(message.partition)", "offset": "\(message.offset)"])
            // Read as `dispatch` reads it (StrictJSON first): a text with a repeated
            // name goes into the record as it arrived, not as one of its readings.
            let event = StrictJSON.check(message.value) == nil ? try? JSONDecoder().decode(S3Event.self, from: Data(message.value)) : nil
            return await services.deadLetter(InvocationRecord(requestId: UUID().uuidString, triggerName: "-", condition: "WorkerCrashed",
                                                              invokeCount: starts,
                                                              payload: event.map { .s3($0) } ?? .raw(String(decoding: message.value, as: UTF8.self)),
                                                              error: WorkerCrashed(starts: starts)),
                                             topic: services.topics.triggersDLQ, key: message.key)
        }
    }

    /// Delivers one message of `<prefix>.events` to every trigger it matches.
    /// Returns false when shutdown interrupted an invocation.
    func dispatch(_ message: KafkaMessage) async -> Bool {
        TriggerTestTrap.check(message.value)
        let event: S3Event
        do {
            // Filters and handlers must not read different values of one name.
            if let problem = StrictJSON.check(message.value) { throw problem }
            event = try JSONDecoder().decode(S3Event.self, from: Data(message.value))
        } catch {
            // S3 sends this when a notification configuration is saved: nothing to deliver. Looked for
            // only here (it has no "Records"): decoding every event twice was 0.8 % of a worker in S5.
            if !(error is JSONTextError), let test = S3TestEvent.detect(message.value) {
                logger.info("s3:TestEvent received and skipped", metadata: ["bucket": "\(test.bucket ?? "-")"])
                return true
            }
            logger.error("undecodable event dead-lettered", metadata: ["partition": "\(message.partition)", "offset": "\(message.offset)"])
            return await services.deadLetter(InvocationRecord(requestId: UUID().uuidString, triggerName: "-", condition: "UndecodableEvent",
                                                              invokeCount: 0, payload: .raw(String(decoding: message.value, as: UTF8.self)),
                                                              error: error), topic: services.topics.triggersDLQ, key: message.key)
        }
        for trigger in registry.s3Triggers {
            let records = event.records.filter(trigger.matches)
            guard !records.isEmpty else { continue }
            guard await invoke(trigger, with: S3Event(records: records), key: message.key, queuedAt: message.queuedAt) else { return false }
        }
        return true
    }

    /// One asynchronous invocation: first try plus retries while the event is
    /// young enough, then an invocation record. Returns false when shutdown interrupted it.
    ///
    /// An event's age counts from `queuedAt`, when it entered `<prefix>.events`
    /// (as Lambda counts from its own queue), not from its `eventTime`: that is
    /// the write's time by the store's clock, which may be skewed, and days old
    /// for a write `ferry reconcile` announces late. Without a queue time the
    /// event's earliest `eventTime` stands in. Neither counts from later than
    /// the invocation's start: the stamp is the producing worker's clock, and a
    /// clock ahead must not keep the event young.
    func invoke(_ trigger: S3TriggerRegistration, with event: S3Event, key: [UInt8]?, queuedAt: Date? = nil) async -> Bool {
        let delivery = trigger.delivery
        let requestId = UUID().uuidString
        let eventTime = (queuedAt ?? event.records.compactMap { Timestamp.parse($0.eventTime) }.min()).map { min($0, Date()) }
        var log = logger
        log[metadataKey: "trigger"] = "\(trigger.name)"
        log[metadataKey: "requestId"] = "\(requestId)"
        var lastError: any Error = CancellationError()
        var condition = "RetriesExhausted"
        var invocations = 0
        for attempt in 1...(1 + delivery.maximumRetryAttempts) {
            if let eventTime, Date().timeIntervalSince(eventTime) > delivery.maximumEventAgeSeconds {
                condition = "EventAgeExceeded"
                if invocations == 0 { lastError = EventTooOld(age: Date().timeIntervalSince(eventTime), limit: delivery.maximumEventAgeSeconds) }
                break
            }
            log[metadataKey: "attempt"] = "\(attempt)"
            let context = services.context(handler: trigger.name, requestId: requestId, attempt: attempt,
                                           timeout: delivery.timeoutSeconds, logger: log) { eventName, _, key in
                trigger.matches(eventName: eventName, key: key)
            }
            invocations += 1
            do {
                try await services.invoke(trigger.name, timeout: delivery.timeoutSeconds) {
                    try await trigger.handler.handle(event, context: context)
                }
                Counter(label: "ferry_trigger_invocations_total", dimensions: [("handler", trigger.name), ("outcome", "success")]).increment()
                if let eventTime {
                    Timer(label: "ferry_trigger_event_age_seconds", dimensions: [("handler", trigger.name)])
                        .record(duration: .milliseconds(clamping: Date().timeIntervalSince(eventTime) * 1000))
                }
                return true
            } catch {
                if Task.isCancelled { return false }
                Counter(label: "ferry_trigger_invocations_total", dimensions: [("handler", trigger.name), ("outcome", "failure")]).increment()
                lastError = error
                if error is RecursiveInvocationError {
                    // Lambda's recursive loop detection: stopped at once, never retried.
                    log.error("\(error)")
                    condition = "RecursiveInvocationDetected"
                    break
                }
                log.warning("trigger invocation failed: \(error)")
                if attempt <= delivery.maximumRetryAttempts {
                    _ = await Backoff.triggerRetry(first: delivery.retryDelaySeconds).pause(beforeRetry: attempt)
                }
            }
        }
        log.error("trigger invocation given up (\(condition)); invocation record sent to \(services.topics.triggersDLQ)")
        return await services.deadLetter(InvocationRecord(requestId: requestId, triggerName: trigger.name, condition: condition,
                                                          invokeCount: invocations, payload: .s3(event), error: lastError),
                                         topic: services.topics.triggersDLQ, key: key)
    }
}

/// An event older than the trigger's maximum event age.
public struct EventTooOld: Error, CustomStringConvertible {
    public var age: Double
    public var limit: Double
    public var description: String { "event is \(age.clampedInt()) s old, older than the maximum event age of \(limit.clampedInt()) s" }
}
