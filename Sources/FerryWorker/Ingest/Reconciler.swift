import FerryCore
import FerryKafka
import FerryS3
import FerryStorage
import FerryStore
import Foundation
import Logging
import FerryConcurrency

/// Finds writes that produced no event (a store without notifications, a
/// missed window) and announces them: it lists a bucket prefix page by page
/// and walks the catalog (what Ferry last announced about each key) beside
/// it, in the same byte order. A listed key the catalog lacks, or holds with
/// another ETag or size, is announced as created (`objects` INSERT or
/// MODIFY); a catalog key no longer listed, as removed (REMOVE). First the
/// catalog catches up with `<prefix>.events` (Ferry's own writes and the
/// store's notifications since the last run), so nothing announced there is
/// announced again. Each page's announcements are acknowledged by Kafka
/// before the catalog records them: a run that stops is run again, and
/// emits only what is still missing. Memory: one page of each side.
public final class Reconciler: Sendable {
    public struct Report: Sendable, CustomStringConvertible {
        public var listed = 0
        public var created = 0
        public var modified = 0
        public var removed = 0
        public var pages = 0
        public var description: String {
            "listed \(listed) in \(pages) page(s): announced \(created) created, \(modified) modified, \(removed) removed"
        }
    }

    private let store: any ObjectStore
    private let catalog: ObjectCatalog
    private let producer: KafkaProducer
    private let kafka: KafkaConfiguration
    private let topics: Topics
    private let events: EventBuilder
    private let streams: StreamRecordBuilder
    private let resolver: any PrefixResolver
    private let logger: Logger
    static let pageSize = 1000

    public init(store: any ObjectStore, catalog: ObjectCatalog, producer: KafkaProducer, kafka: KafkaConfiguration, topics: Topics,
                region: String, resolver: any PrefixResolver, logger: Logger) {
        self.store = store; self.catalog = catalog; self.producer = producer; self.kafka = kafka; self.topics = topics
        events = EventBuilder(region: region)
        streams = StreamRecordBuilder(region: region, topics: topics)
        self.resolver = resolver
        self.logger = logger
    }

    /// Brings the catalog up to the end of `<prefix>.events` as it is now,
    /// from where the last catch-up stopped; returns the events read.
    @discardableResult
    public func catchUp() async throws -> Int {
        let saved = try await catalog.value("events-offsets").flatMap { try? JSONDecoder().decode([Int32: Int64].self, from: Data($0.utf8)) } ?? [:]
        let probe = try await KafkaConsumer.reading(topic: topics.events, from: [:], configuration: kafka, logger: logger)
        let ends = try await probe.endOffsets(of: topics.events)
        var remaining = ends.filter { $0.value > (saved[$0.key] ?? 0) }
        guard !remaining.isEmpty else { await probe.close(); return 0 }
        var starts: [Int32: Int64] = [:]
        for (partition, _) in remaining {
            let start = saved[partition] ?? 0
            // Below the log start (retention) the consumer begins at the log start.
            let logStart = await probe.logStart(of: TopicPartition(topic: topics.events, partition: partition)) ?? 0
            starts[partition] = max(start, logStart)
            if starts[partition]! >= remaining[partition]! { remaining[partition] = nil }
        }
        await probe.close()
        guard !remaining.isEmpty else { return 0 }
        let consumer = try await KafkaConsumer.reading(topic: topics.events, from: starts.filter { remaining[$0.key] != nil },
                                                       configuration: kafka, bufferCapacity: 4096, logger: logger)
        defer { consumer.close() }
        var next = saved.merging(starts) { _, start in start }
        var upserts: [ObjectCatalog.Entry] = [], removals: [(bucket: String, key: String)] = [], read = 0
        func flush() async throws {
            try await catalog.upsert(upserts)
            try await catalog.remove(removals)
            upserts = []; removals = []
            try await catalog.setValue(try FerryJSON.text(next), for: "events-offsets")
        }
        let timer = DeadlineTimer.start(after: 300) { consumer.stopFetching() }
        defer { timer.cancel() }
        for await message in consumer {
            read += 1
            next[message.partition] = message.offset + 1
            if let event = try? JSONDecoder().decode(S3Event.self, from: Data(message.value)) {
                for record in event.records {
                    let key = record.s3.object.decodedKey
                    if record.eventType.hasPrefix("ObjectRemoved") {
                        upserts.removeAll { $0.bucket == record.s3.bucket.name && $0.key == key }
                        removals.append((record.s3.bucket.name, key))
                    } else {
                        removals.removeAll { $0.bucket == record.s3.bucket.name && $0.key == key }
                        upserts.append(entry(bucket: record.s3.bucket.name, key: key, size: record.s3.object.size,
                                             eTag: record.s3.object.eTag, lastModified: record.eventTime))
                    }
                }
            }
            if upserts.count + removals.count >= 500 { try await flush() }
            if let end = remaining[message.partition], message.offset + 1 >= end { remaining[message.partition] = nil }
            if remaining.isEmpty { break }
        }
        try await flush()
        guard remaining.isEmpty else { throw FerryError(.kafkaError, "\(topics.events) was not read to its end within 300 s") }
        return read
    }

    /// Lists `prefix` of `bucket` and announces what the catalog lacks or
    /// holds differently. `progress` sees the report after every page.
    public func reconcile(bucket: String, prefix: String, dryRun: Bool = false,
                          progress: @Sendable (Report) -> Void = { _ in }) async throws -> Report {
        var report = Report()
        var known = try await catalog.page(bucket: bucket, prefix: prefix, after: nil, limit: Self.pageSize)
        var knownIndex = 0
        func nextKnown() async throws -> ObjectCatalog.Entry? {
            if knownIndex == known.count {
                guard let last = known.last else { return nil }
                known = try await catalog.page(bucket: bucket, prefix: prefix, after: last.key, limit: Self.pageSize)
                knownIndex = 0
                if known.isEmpty { return nil }
            }
            return known[knownIndex]
        }
        var continuation: String?
        var listingDone = false
        var pages = ListingProgress(operation: "ListObjectsV2 of \(bucket)/\(prefix)")
        repeat {
            let page = try await store.listObjects(bucket: bucket, prefix: prefix, continuation: continuation, maxKeys: Self.pageSize)
            report.pages += 1
            var changes: [(StoreNotification, ObjectCatalog.Entry?, ObjectCatalog.Entry?)] = []
            for item in page.items {
                report.listed += 1
                // Catalog keys before this one are gone from the store.
                while let k = try await nextKnown(), Self.precedes(k.key, item.key) {
                    changes.append((removal(bucket: bucket, k), nil, k))
                    knownIndex += 1
                }
                let current = entry(bucket: bucket, key: item.key, size: item.size, eTag: item.eTag,
                                    lastModified: Timestamp.iso8601(item.lastModified ?? Date()))
                if let k = try await nextKnown(), k.key == item.key {
                    knownIndex += 1
                    if k.eTag != current.eTag || k.size != current.size { changes.append((creation(bucket: bucket, item), current, k)) }
                } else {
                    changes.append((creation(bucket: bucket, item), current, nil))
                }
            }
            continuation = try pages.advance(truncated: page.next != nil, next: page.next)
            listingDone = continuation == nil
            if listingDone {
                while let k = try await nextKnown() {
                    changes.append((removal(bucket: bucket, k), nil, k))
                    knownIndex += 1
                }
            }
            for (change, _, old) in changes {
                if change.isRemoval { report.removed += 1 } else if old == nil { report.created += 1 } else { report.modified += 1 }
            }
            if !dryRun { try await announce(changes) }
            progress(report)
        } while !listingDone
        return report
    }

    private func announce(_ changes: [(StoreNotification, ObjectCatalog.Entry?, ObjectCatalog.Entry?)]) async throws {
        guard !changes.isEmpty else { return }
        var messages: [OutgoingMessage] = []
        for (change, new, old) in changes {
            let event = events.event(for: change, sequencer: EventBuilder.sequencer(for: change))
            let record = streams.objectRecord(change: change, new: new, old: old)
            messages.append(OutgoingMessage(topic: topics.events, key: Array("\(change.bucket)/\(change.key)".utf8), value: try FerryJSON.encode(event)))
            messages.append(OutgoingMessage(topic: topics.streams, key: Array(record.kafkaKey.utf8), value: try FerryJSON.encode(record)))
        }
        for result in await producer.sendAll(messages, timeout: 120) { try result.get() }
        try await catalog.upsert(changes.compactMap { $0.1 })
        try await catalog.remove(changes.filter { $0.0.isRemoval }.map { ($0.0.bucket, $0.0.key) })
    }

    private func creation(bucket: String, _ item: ObjectListing.Item) -> StoreNotification {
        let time = Timestamp.iso8601(item.lastModified ?? Date())
        return StoreNotification(store: "reconcile", eventName: "ObjectCreated:Put", bucket: bucket, key: item.key, size: item.size,
                                 eTag: item.eTag, versionId: nil, sequencer: nil, eventTime: time,
                                 eventId: "reconcile/\(bucket)/\(item.key)/\(item.eTag ?? "")", metadata: nil,
                                 principalId: "ferry-reconcile", requestId: "", hostId: "", region: "")
    }

    private func removal(bucket: String, _ entry: ObjectCatalog.Entry) -> StoreNotification {
        StoreNotification(store: "reconcile", eventName: "ObjectRemoved:Delete", bucket: bucket, key: entry.key, size: nil, eTag: nil,
                          versionId: nil, sequencer: nil, eventTime: Timestamp.iso8601(Date()),
                          eventId: "reconcile/\(bucket)/\(entry.key)/removed", metadata: nil, principalId: "ferry-reconcile",
                          requestId: "", hostId: "", region: "")
    }

    private func entry(bucket: String, key: String, size: Int64?, eTag: String?, lastModified: String) -> ObjectCatalog.Entry {
        let area = resolver.area(of: key)
        return ObjectCatalog.Entry(bucket: bucket, key: key, size: size, eTag: eTag.map(EventBuilder.unquoted), owner: area?.owner,
                                   accessLevel: area?.level.rawValue, lastModified: lastModified)
    }

    /// Byte order of UTF-8, as S3 lists keys.
    static func precedes(_ a: String, _ b: String) -> Bool { Array(a.utf8).lexicographicallyPrecedes(Array(b.utf8)) }
}
