import FerryCore
import FerryEngine
import FerryKafka
import FerryS3
import FerryStorage
import FerryStore
import Foundation
import Logging
import Metrics
import Synchronization
import FerryConcurrency

/// The ingest role: turns the store's own bucket notifications (from
/// `<prefix>.ingest`, filled by `NotificationEndpoint`, and from any topic
/// where a store already sends them) into events on `<prefix>.events` in
/// AWS's exact shape and `objects` records on `<prefix>.streams`, so triggers
/// run for every write to the bucket, not only Ferry's.
///
/// A write Ferry made is announced once, by the worker that made it:
/// - a creation is Ferry's when the object carries Ferry's transfer-id marker
///   (in the notification, as Ceph and MinIO send the metadata, or on a HEAD
///   whose ETag matches, for AWS);
/// - a removal is Ferry's when a worker announced the removal of that key on
///   `<prefix>.events` within `settleSeconds` after the notification arrived
///   (or in the minute before): removals are held that long.
/// A store's repeat of a notification (same event id) is dropped. Offsets
/// are committed once each notification's changes are published (or
/// dropped), so a crash repeats, never loses, one.
///
/// Only what the store confirms is announced: a change of a bucket outside
/// `ingest.buckets` is dropped with its reason; a creation is announced with
/// the attributes a HEAD finds (or, when the key is gone or changed again
/// since, as the store notified it: its later notification follows). When
/// the HEAD cannot be made (the store keeps failing or refuses), nothing is
/// announced: the notification goes to `<prefix>.ingest.dlq` with the reason.
final class IngestProcessor: Sendable {
    private let consumer: KafkaConsumer
    private let ferryEvents: KafkaConsumer
    private let producer: KafkaProducer
    private let store: any ObjectStore
    private let catalog: ObjectCatalog
    private let events: EventBuilder
    private let streams: StreamRecordBuilder
    private let resolver: any PrefixResolver
    private let topics: Topics
    private let buckets: Set<String>
    private let settleSeconds: Double
    private let recent = RecentFerryChanges()
    private let offsets = ContiguousOffsets()
    private let claims = ClaimedNotifications()
    private let logger: Logger

    /// Notifications handled at once (removals wait out the settle window).
    static let concurrency = 64

    init(configuration: WorkerConfiguration, store: any ObjectStore, producer: KafkaProducer, logger: Logger) async throws {
        var kafka = configuration.kafka.forQuietTopic()
        kafka["group.id"] = configuration.topics.ingestGroup
        kafka["auto.offset.reset"] = "earliest"
        consumer = try KafkaConsumer(configuration: kafka, subscribing: [configuration.topics.ingest] + configuration.ingest.topics,
                                     logger: logger)
        ferryEvents = try await KafkaConsumer.tailing(topic: configuration.topics.events, configuration: configuration.kafka, logger: logger)
        self.producer = producer
        self.store = store
        catalog = try ObjectCatalog(directory: configuration.stateDirectory)
        events = EventBuilder(region: configuration.region)
        streams = StreamRecordBuilder(region: configuration.region, topics: configuration.topics)
        resolver = configuration.prefixResolver
        topics = configuration.topics
        buckets = configuration.ingest.buckets
        settleSeconds = configuration.ingest.settleSeconds
        self.logger = logger
    }

    func run() async {
        let watcher = Task { [self] in await watchFerryEvents() }
        let commits = Task { [self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(200))
                let due = offsets.take()
                if !due.isEmpty { try? await consumer.commit(due) }
            }
        }
        let slots = AsyncSemaphore(limit: Self.concurrency)
        await withTaskCancellationHandler {
            await withDiscardingTaskGroup { group in
                for await message in consumer {
                    offsets.begin(message)
                    await slots.acquire()
                    group.addTask { [self] in
                        defer { slots.release() }
                        if await handle(message) { offsets.finish(message) }
                    }
                }
            }
            let due = offsets.take()
            if !due.isEmpty { try? await consumer.commit(due) }
            await consumer.close()
        } onCancel: {
            consumer.stopFetching()
        }
        watcher.cancel()
        ferryEvents.stopFetching()
        commits.cancel()
    }

    /// Follows `<prefix>.events`: Ferry's own writes, for the duplicate rule and the catalog.
    private func watchFerryEvents() async {
        for await message in ferryEvents {
            guard let event = try? JSONDecoder().decode(S3Event.self, from: Data(message.value)) else { continue }
            for record in event.records where record.eventSource == "aws:s3" {
                let change = (bucket: record.s3.bucket.name, key: record.s3.object.decodedKey)
                let removal = record.eventType.hasPrefix("ObjectRemoved")
                recent.note(bucket: change.bucket, key: change.key, removal: removal, eTag: record.s3.object.eTag)
                if removal {
                    try? await catalog.remove([change])
                } else {
                    try? await catalog.upsert([entry(bucket: change.bucket, key: change.key, size: record.s3.object.size,
                                                     eTag: record.s3.object.eTag, lastModified: record.eventTime)])
                }
            }
        }
    }

    /// True once the message has its outcome (published, or dropped with a reason).
    func handle(_ message: KafkaMessage) async -> Bool {
        let received = Date()
        let changes: [StoreNotification]
        do {
            changes = try StoreNotificationDecoder.decode(message.value)
        } catch {
            logger.error("dropping an undecodable notification at \(message.topic)/\(message.partition)/\(message.offset): \(error)")
            Counter(label: "ferry_ingest_changes_total", dimensions: [("outcome", "undecodable")]).increment()
            return true
        }
        var deadLettered = false
        for change in changes {
            guard buckets.contains(change.bucket) else {
                logger.error("dropping the change of s3://\(change.bucket)/\(change.key) from \(message.topic)/\(message.partition)/\(message.offset): \(IngestBuckets.refusal(change.bucket))")
                Counter(label: "ferry_ingest_changes_total", dimensions: [("outcome", "foreign_bucket")]).increment()
                continue
            }
            var retry = 0
            while !Task.isCancelled {
                do {
                    try await handle(change, received: received)
                    break
                } catch let unconfirmed as UnconfirmedChange {
                    // Once per notification: a redrive runs all its changes again, and the catalog drops the ones announced.
                    if !deadLettered { try? await deadLetter(message, unconfirmed.reason(change)) }
                    deadLettered = true
                    logger.error("not announcing \(change.eventName) of s3://\(change.bucket)/\(change.key): \(unconfirmed.reason(change).message); the notification is on \(topics.ingestDLQ)")
                    Counter(label: "ferry_ingest_changes_total", dimensions: [("outcome", "dead_lettered")]).increment()
                    break
                } catch let error as KafkaError where error.isPermanentForMessage {
                    // The same message would be refused again: retrying would hold the partition forever.
                    logger.error("dropping the change of s3://\(change.bucket)/\(change.key) from \(message.topic)/\(message.partition)/\(message.offset): Kafka refuses its event or record: \(error)")
                    Counter(label: "ferry_ingest_changes_total", dimensions: [("outcome", "unpublishable")]).increment()
                    break
                } catch {
                    retry += 1
                    logger.error("cannot publish the change of s3://\(change.bucket)/\(change.key), retry \(retry): \(error)")
                    _ = await Backoff.ingestPublish.pause(beforeRetry: retry)
                }
            }
            if Task.isCancelled { return false }
        }
        return true
    }

    private func handle(_ change: StoreNotification, received: Date) async throws {
        await claims.claim(change.eventId)
        defer { claims.release(change.eventId) }
        if try await catalog.seen(change.eventId) {
            Counter(label: "ferry_ingest_changes_total", dimensions: [("outcome", "repeat")]).increment()
            return
        }
        var head: ObjectAttributes?
        if change.isRemoval {
            // A worker that removed the key announces it itself: wait for that long enough.
            let deadline = received.addingTimeInterval(settleSeconds)
            while Date() < deadline, !recent.removed(bucket: change.bucket, key: change.key, since: received.addingTimeInterval(-60)) {
                try await Task.sleep(for: .milliseconds(100))
            }
            if recent.removed(bucket: change.bucket, key: change.key, since: received.addingTimeInterval(-60)) {
                return try await dropAsFerrys(change, "a worker announced this removal")
            }
        } else {
            if change.carriesFerryMarker { return try await dropAsFerrys(change, "the object carries a Ferry transfer id") }
            head = try await confirm(change)
            let same = head.map { EventBuilder.unquoted($0.eTag ?? "") == change.eTag } ?? false
            if same, head?.metadata[TransferMarker.transferId] != nil {
                return try await dropAsFerrys(change, "the object carries a Ferry transfer id")
            }
            if !same {
                // Changed again since, or gone: fall back to what workers announce.
                let deadline = received.addingTimeInterval(settleSeconds)
                while Date() < deadline, !recent.created(bucket: change.bucket, key: change.key, eTag: change.eTag) {
                    try await Task.sleep(for: .milliseconds(100))
                }
                if recent.created(bucket: change.bucket, key: change.key, eTag: change.eTag) {
                    return try await dropAsFerrys(change, "a worker announced this write")
                }
                head = nil
            }
        }
        try await publish(change, head: head)
    }

    /// How long a HEAD is tried before the change counts as unconfirmed:
    /// six attempts over about 15 s at most (full jitter), transient failures only.
    static let headRetry = RetryPolicy(retryLimit: 5, baseDelaySeconds: 0.5, maxDelaySeconds: 8)

    /// The object as the store has it now (nil: no such key), or
    /// `UnconfirmedChange` when the store could not be asked.
    private func confirm(_ change: StoreNotification) async throws -> ObjectAttributes? {
        do {
            return try await Self.headRetry.run(onRetry: { [logger] attempt, error in
                logger.warning("HEAD s3://\(change.bucket)/\(change.key) failed (attempt \(attempt)), retrying: \(error)")
            }) { () async throws(FerryError) -> ObjectAttributes? in
                try await store.headObject(bucket: change.bucket, key: change.key)
            }
        } catch {
            throw UnconfirmedChange(error: error)
        }
    }

    /// Writes the notification as it came to `<prefix>.ingest.dlq`, with why.
    private func deadLetter(_ message: KafkaMessage, _ reason: FerryError) async throws {
        try await producer.send(topic: topics.ingestDLQ, key: message.key, value: message.value, headers: [
            (DLQHeader.errorCode, reason.code.rawValue), (DLQHeader.errorMessage, String(reason.message.prefix(2000))),
            (DLQHeader.sourceTopic, message.topic), (DLQHeader.sourcePartition, "\(message.partition)"),
            (DLQHeader.sourceOffset, "\(message.offset)"),
        ])
    }

    private func dropAsFerrys(_ change: StoreNotification, _ why: String) async throws {
        logger.debug("not announcing \(change.eventName) of s3://\(change.bucket)/\(change.key) again: \(why)")
        Counter(label: "ferry_ingest_changes_total", dimensions: [("outcome", "ferry_own")]).increment()
        _ = try await catalog.firstSighting(change.eventId)
    }

    private func publish(_ change: StoreNotification, head: ObjectAttributes?) async throws {
        let old = try await catalog.entry(bucket: change.bucket, key: change.key)
        var new: ObjectCatalog.Entry?
        if !change.isRemoval {
            var e = entry(bucket: change.bucket, key: change.key, size: change.size, eTag: change.eTag, lastModified: change.eventTime)
            e.contentType = head?.contentType
            e.metadata = (head?.metadata ?? change.metadata ?? [:]).filter { !TransferMarker.isMarker($0.key) }
            new = e
        }
        let event = events.event(for: change, sequencer: EventBuilder.sequencer(for: change))
        let record = streams.objectRecord(change: change, new: new, old: old)
        let results = await producer.sendAll([
            OutgoingMessage(topic: topics.events, key: Array("\(change.bucket)/\(change.key)".utf8), value: try FerryJSON.encode(event)),
            OutgoingMessage(topic: topics.streams, key: Array(record.kafkaKey.utf8), value: try FerryJSON.encode(record)),
        ])
        for result in results { try result.get() }
        if let new { try await catalog.upsert([new]) } else { try await catalog.remove([(change.bucket, change.key)]) }
        _ = try await catalog.firstSighting(change.eventId)
        Counter(label: "ferry_ingest_changes_total", dimensions: [("outcome", "published")]).increment()
        logger.info("\(change.eventName) of s3://\(change.bucket)/\(change.key) from \(change.store) announced")
    }

    /// A catalog entry; the level and owner are the layout's reading of the key.
    private func entry(bucket: String, key: String, size: Int64?, eTag: String?, lastModified: String) -> ObjectCatalog.Entry {
        let area = resolver.area(of: key)
        return ObjectCatalog.Entry(bucket: bucket, key: key, size: size, eTag: eTag.map(EventBuilder.unquoted), owner: area?.owner,
                                   accessLevel: area?.level.rawValue, lastModified: lastModified)
    }
}

/// A creation the store could not be asked about: its HEAD kept failing, or was refused.
struct UnconfirmedChange: Error {
    var error: FerryError

    func reason(_ change: StoreNotification) -> FerryError {
        FerryError(error.code, "the store did not confirm \(change.eventName) of s3://\(change.bucket)/\(change.key): HEAD failed: \(error.message)")
    }
}

/// Writes and removals workers announced lately, by key (ten minutes).
///
/// Its size follows the fleet's writes in the window: a key's older changes go
/// when it changes again, and keys with none left go in a `DoublingSweep`.
final class RecentFerryChanges: Sendable {
    private struct Change { var removal: Bool; var eTag: String?; var at: Date }
    private struct State {
        var changes: [String: [Change]] = [:]
        var sweep = DoublingSweep(floor: RecentFerryChanges.firstSweep)
        var sweeps = 0
    }
    private let state = Mutex(State())
    static let window: TimeInterval = 600
    static let firstSweep = 10_000

    func note(bucket: String, key: String, removal: Bool, eTag: String?, now: Date = Date()) {
        state.withLock { s in
            var kept = s.changes.removeValue(forKey: "\(bucket)/\(key)") ?? []
            kept.removeAll { now.timeIntervalSince($0.at) >= Self.window }
            kept.append(Change(removal: removal, eTag: eTag.map(EventBuilder.unquoted), at: now))
            s.changes["\(bucket)/\(key)"] = kept
            guard s.sweep.isDue(s.changes.count) else { return }
            s.changes = s.changes.filter { $0.value.contains { now.timeIntervalSince($0.at) < Self.window } }
            s.sweep.swept(leaving: s.changes.count)
            s.sweeps += 1
        }
    }

    /// Keys held, changes held, and sweeps made so far.
    var size: (keys: Int, changes: Int, sweeps: Int) {
        state.withLock { s in (s.changes.count, s.changes.values.reduce(0) { $0 + $1.count }, s.sweeps) }
    }

    func removed(bucket: String, key: String, since: Date) -> Bool {
        state.withLock { $0.changes["\(bucket)/\(key)"]?.contains { $0.removal && $0.at >= since } ?? false }
    }

    func created(bucket: String, key: String, eTag: String?) -> Bool {
        state.withLock { $0.changes["\(bucket)/\(key)"]?.contains { !$0.removal && $0.eTag == eTag.map(EventBuilder.unquoted) } ?? false }
    }
}
