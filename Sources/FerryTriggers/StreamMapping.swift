import FerryTriggerKit
import FerryCore
import FerryKafka
import Foundation
import Logging
import Metrics
import Synchronization
import FerryConcurrency

/// One stream trigger's event source mapping: reads `<prefix>.streams` in its
/// own consumer group, and per partition gathers batches (BatchSize,
/// MaximumBatchingWindowInSeconds), drops records of other tables (by their
/// key) and records its filters do not match, both before decoding them,
/// and invokes the handler, retrying a failing batch (bisecting it, or from
/// the first reported item failure) until it succeeds, runs out of retries or
/// its records out of age; then a failure record goes to the on-failure
/// destination and the partition moves on. A partition's batches run one
/// after another, so one item's records reach the handler in order.
final class StreamMapping: Sendable {
    let trigger: StreamTriggerRegistration
    private let services: TriggerServices
    /// The mapping's consumer: made at once, or (`LATEST`) once its starting position is pinned.
    private let lanes: Mutex<PartitionLanes?>
    private let makeLanes: @Sendable () throws(KafkaError) -> PartitionLanes
    private let pin: (@Sendable () async -> Bool)?
    private let logger: Logger

    init(trigger: StreamTriggerRegistration, services: TriggerServices, kafka: KafkaConfiguration, group: String,
         maxStarts: Int = 3, logger: Logger) throws(KafkaError) {
        self.trigger = trigger
        self.services = services
        var named = logger
        named[metadataKey: "trigger"] = "\(trigger.name)"
        let log = named
        self.logger = log
        let topic = services.topics.streams
        makeLanes = { () throws(KafkaError) in try PartitionLanes(kafka: kafka, group: group, topics: [topic], maxStarts: maxStarts,
                                                                 batchSize: trigger.mapping.batchSize, logger: log) }
        switch trigger.mapping.startingPosition {
        case .trimHorizon:
            // The group starts at each partition's beginning by itself (auto.offset.reset=earliest).
            lanes = Mutex(try makeLanes())
            pin = nil
        case .latest:
            // Joining before the pin would start the group at the beginning.
            lanes = Mutex(nil)
            pin = { await StartingPositionPin.pinLatestRetrying(kafka: kafka, group: group, topic: topic, logger: log) }
        }
    }

    var destination: String { trigger.mapping.onFailureDestination ?? services.topics.triggersDLQ }

    var assignedPartitions: Set<TopicPartition> { lanes.withLock { $0?.assignedPartitions } ?? [] }

    var heldMessages: Int { lanes.withLock { $0?.heldMessages } ?? 0 }

    func run() async {
        var made = lanes.withLock { $0 }
        if made == nil, let pin {
            guard await pin() else { return }
            do {
                let fresh = try makeLanes()
                lanes.withLock { $0 = fresh }
                made = fresh
            } catch {
                logger.critical("stream trigger cannot start its consumer: \(error)")
                return
            }
        }
        await made?.run { [self] lane in await work(lane) }
    }

    private func work(_ lane: PartitionLanes.Lane) async {
        let mapping = trigger.mapping
        while case .message(let first) = await lane.messages.next() {
            var batch = [first] + lane.messages.take(max: mapping.batchSize - 1)
            if mapping.maximumBatchingWindowSeconds > 0 {
                let deadline = ContinuousClock.now + .seconds(clamping: mapping.maximumBatchingWindowSeconds)
                gathering: while batch.count < mapping.batchSize {
                    switch await lane.messages.next(until: deadline) {
                    case .message(let message):
                        batch.append(message)
                        batch += lane.messages.take(max: mapping.batchSize - batch.count)
                    case .timedOut, .finished: break gathering
                    }
                }
            }
            // A batch with a suspect in it (being handled when a worker stopped) goes one record at a time,
            // each alone in the process, so that a further death is counted against the record that caused it.
            var suspects = false
            for message in batch where await lane.isSuspect(message) { suspects = true; break }
            for part in suspects ? batch.map({ [$0] }) : [batch] {
                guard !lane.isRevoked, !Task.isCancelled, await handleGuarded(part, lane: lane, alone: suspects) else {
                    // Given back: this part and the rest of the batch.
                    batch.drop { $0.offset < part[0].offset }.forEach(lane.skipped)
                    break
                }
                part.forEach(lane.done)
            }
        }
    }

    /// `handle` under the crash-loop breaker (`LaneStarts`): the messages'
    /// starts recorded in Kafka first; a record started `maxStarts` times
    /// without an outcome is not invoked but sent to the failure destination.
    private func handleGuarded(_ messages: [KafkaMessage], lane: PartitionLanes.Lane, alone: Bool) async -> Bool {
        await lane.guarded(messages, alone: alone) {
            await handle(messages)
        } quarantined: { starts in
            logger.error("stream record not invoked: \(WorkerCrashed(starts: starts)); sent to \(destination)",
                         metadata: ["partition": "\(messages[0].partition)", "offset": "\(messages[0].offset)"])
            let failure = StreamFailureRecord(trigger: trigger.name, condition: "WorkerCrashed", invokeCount: starts,
                                              items: [], messages: messages, error: WorkerCrashed(starts: starts))
            return await services.deadLetter(failure, topic: destination, key: messages[0].key)
        }
    }

    /// A record with the message that carried it.
    struct Item: Sendable {
        var message: KafkaMessage
        var record: DynamoDBEvent.Record
        /// When the record entered the stream topic (the message's time, else the
        /// change's), never later than when it was read: its age counts from here.
        var queuedAt: Double

        init(message: KafkaMessage, record: DynamoDBEvent.Record, readAt: Date = Date()) {
            self.message = message
            self.record = record
            queuedAt = min(message.queuedAt?.timeIntervalSince1970 ?? record.dynamodb.approximateCreationDateTime ?? readAt.timeIntervalSince1970,
                           readAt.timeIntervalSince1970)
        }
    }

    /// Decodes, ages and filters a batch, then delivers it. False when shutdown interrupted it.
    func handle(_ messages: [KafkaMessage]) async -> Bool {
        var items: [Item] = []
        for message in messages {
            // Workers key each record `<table>/<item key>`: another table's record
            // is passed over before it is decoded (decoding every record for every
            // stream trigger was the worker's largest CPU cost in the pipeline
            // benchmark). A record keyed otherwise is decoded and checked.
            if let table = Self.table(keyedBy: message.key), table != trigger.table { continue }
            // Filters see the record's JSON as it arrived, as Lambda's do; one it
            // drops is not decoded. (JSON that does not parse fails below.)
            let value = Data(message.value), filters = trigger.mapping.filterCriteria
            // Held to StrictJSON before either reads it: the filter's reader keeps
            // a repeated name's last value and the decoder its first.
            let problem = StrictJSON.check(message.value)
            if problem == nil, !filters.isEmpty, let json = try? FoundationJSON.object(message.value), !filters.matches(json: json) {
                continue
            }
            do {
                if let problem { throw problem }
                let record = try JSONDecoder().decode(DynamoDBEvent.Record.self, from: value)
                guard record.tableName == trigger.table else { continue }  // an unkeyed record of another table
                var projected = record
                projected.dynamodb = record.dynamodb.projected(to: trigger.viewType)
                items.append(Item(message: message, record: projected))
            } catch {
                logger.error("undecodable stream record sent to \(destination)", metadata: ["partition": "\(message.partition)", "offset": "\(message.offset)"])
                let failure = StreamFailureRecord(trigger: trigger.name, condition: "UndecodableRecord", invokeCount: 0,
                                                  items: [], messages: [message], error: error)
                guard await services.deadLetter(failure, topic: destination, key: message.key) else { return false }
            }
        }
        Counter(label: "ferry_trigger_filtered_records_total", dimensions: [("handler", trigger.name)]).increment(by: messages.count - items.count)
        return items.isEmpty ? true : await deliver(items)
    }

    /// The table a stream record's key names: what comes before its first `/`
    /// (table names have none).
    static func table(keyedBy key: [UInt8]?) -> String? {
        guard let key, let slash = key.firstIndex(of: UInt8(ascii: "/")), slash > 0 else { return nil }
        return String(decoding: key[..<slash], as: UTF8.self)
    }

    enum Result {
        case success
        case itemFailures(Set<String>)
        case failure(any Error)
        case interrupted
    }

    private func deliver(_ items: [Item]) async -> Bool {
        let mapping = trigger.mapping
        var pending: [[Item]] = [items]
        var retries = 0
        var invocations = 0
        while !pending.isEmpty {
            var batch = pending.removeFirst()
            if mapping.maximumRecordAgeSeconds >= 0 {
                // Age from when the record entered the stream topic (as a DynamoDB stream
                // ages its records): a record `ferry reconcile` writes late carries the
                // change's own, older time. Without a queue time, that time stands in.
                let now = Date().timeIntervalSince1970
                let expired = batch.filter { now - $0.queuedAt > mapping.maximumRecordAgeSeconds }
                if !expired.isEmpty {
                    logger.error("\(expired.count) record(s) older than MaximumRecordAgeInSeconds sent to \(destination)")
                    let failure = StreamFailureRecord(trigger: trigger.name, condition: "RecordAgeExceeded", invokeCount: invocations,
                                                      items: expired, error: RecordTooOld(limit: mapping.maximumRecordAgeSeconds))
                    guard await services.deadLetter(failure, topic: destination, key: expired.first?.message.key) else { return false }
                    let gone = Set(expired.map(\.record.eventID))
                    batch.removeAll { gone.contains($0.record.eventID) }
                    if batch.isEmpty { retries = 0; continue }
                }
            }
            invocations += 1
            let result = await invoke(batch, attempt: retries + 1)
            var retry: [Item]
            var lastError: any Error
            switch result {
            case .interrupted:
                return false
            case .success:
                retries = 0
                invocations = 0
                continue
            case .itemFailures(let ids):
                // Checkpoint before the first failed record; everything from it is retried.
                let first = batch.firstIndex { ids.contains($0.record.eventID) } ?? 0
                retry = Array(batch[first...])
                lastError = BatchItemFailed(eventIDs: ids)
            case .failure(let error):
                lastError = error
                if error is RecursiveInvocationError {
                    logger.error("\(error)")
                    guard await giveUp(batch, condition: "RecursiveInvocationDetected", invocations: invocations, error: error) else { return false }
                    retries = 0; invocations = 0
                    continue
                }
                if mapping.bisectBatchOnFunctionError && batch.count > 1 {
                    let half = batch.count / 2
                    logger.warning("batch of \(batch.count) failed (\(error)); bisecting")
                    pending.insert(contentsOf: [Array(batch[..<half]), Array(batch[half...])], at: 0)
                    continue
                }
                retry = batch
            }
            retries += 1
            if mapping.maximumRetryAttempts >= 0 && retries > mapping.maximumRetryAttempts {
                guard await giveUp(retry, condition: "RetryAttemptsExhausted", invocations: invocations, error: lastError) else { return false }
                retries = 0; invocations = 0
                continue
            }
            logger.warning("batch failed, retry \(retries) from record \(retry.first?.record.eventID ?? "-"): \(lastError)")
            _ = await Backoff.streamRetry(first: mapping.retryDelaySeconds).pause(beforeRetry: retries)
            if Task.isCancelled { return false }
            pending.insert(retry, at: 0)
        }
        return true
    }

    private func giveUp(_ items: [Item], condition: String, invocations: Int, error: any Error) async -> Bool {
        logger.error("\(items.count) record(s) given up (\(condition)); failure record sent to \(destination)")
        let failure = StreamFailureRecord(trigger: trigger.name, condition: condition, invokeCount: invocations, items: items, error: error)
        return await services.deadLetter(failure, topic: destination, key: items.first?.message.key)
    }

    private func invoke(_ batch: [Item], attempt: Int) async -> Result {
        for item in batch { TriggerTestTrap.check(item.message.value) }
        let requestId = UUID().uuidString
        var log = logger
        log[metadataKey: "requestId"] = "\(requestId)"
        log[metadataKey: "attempt"] = "\(attempt)"
        let trigger = self.trigger
        let context = services.context(handler: trigger.name, requestId: requestId, attempt: attempt,
                                       timeout: trigger.mapping.timeoutSeconds, logger: log) { _, bucket, key in
            // Only writes to objects come back on a stream: as the INSERT/MODIFY of `objects` they would cause.
            guard trigger.table == "objects" else { return false }
            return trigger.matches(StreamMapping.probe(bucket: bucket, key: key))
        }
        let event = DynamoDBEvent(records: batch.map(\.record))
        do {
            let response = try await services.invoke(trigger.name, timeout: trigger.mapping.timeoutSeconds) {
                try await trigger.handler.handle(event, context: context)
            }
            guard trigger.mapping.reportBatchItemFailures, !response.batchItemFailures.isEmpty else {
                Counter(label: "ferry_trigger_invocations_total", dimensions: [("handler", trigger.name), ("outcome", "success")]).increment()
                return .success
            }
            Counter(label: "ferry_trigger_invocations_total", dimensions: [("handler", trigger.name), ("outcome", "partial")]).increment()
            // A record is named by its SequenceNumber, as Lambda's stream handlers name it, or by
            // its eventID (Ferry's first form). Lambda treats an empty or unknown identifier
            // as a failure of the whole batch.
            var known: [String: String] = [:]
            for item in batch {
                known[item.record.dynamodb.sequenceNumber] = item.record.eventID
                known[item.record.eventID] = item.record.eventID
            }
            let named = response.batchItemFailures.map(\.itemIdentifier)
            guard named.allSatisfy({ known[$0] != nil }) else { return .failure(BatchItemFailed(eventIDs: Set(named))) }
            return .itemFailures(Set(named.compactMap { known[$0] }))
        } catch {
            if Task.isCancelled { return .interrupted }
            Counter(label: "ferry_trigger_invocations_total", dimensions: [("handler", trigger.name), ("outcome", "failure")]).increment()
            return .failure(error)
        }
    }

    /// The `objects` INSERT a write to s3://bucket/key would cause, as far as
    /// it is known before the write: for the loop guard's filter check.
    static func probe(bucket: String, key: String) -> DynamoDBEvent.Record {
        let keys: AttributeMap = ["bucket": .string(bucket), "key": .string(key)]
        return DynamoDBEvent.Record(eventID: "probe", eventName: .insert, awsRegion: "",
                                    eventSourceARN: "arn:aws:dynamodb::000000000000:table/objects/stream/ferry",
                                    dynamodb: StreamRecord(approximateCreationDateTime: nil, keys: keys, newImage: keys, oldImage: nil,
                                                           sequenceNumber: "0", streamViewType: .newAndOldImages))
    }
}

/// The handler reported these records as failed.
public struct BatchItemFailed: Error, CustomStringConvertible {
    /// The identifiers as the handler gave them (sequence numbers or event ids).
    public var eventIDs: Set<String>
    public var description: String { "handler reported failed records: \(eventIDs.sorted().joined(separator: ", "))" }
}

/// Records older than the mapping's MaximumRecordAgeInSeconds.
public struct RecordTooOld: Error, CustomStringConvertible {
    public var limit: Double
    public var description: String { "records older than MaximumRecordAgeInSeconds (\(limit.clampedInt()) s)" }
}
