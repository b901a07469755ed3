@testable import FerryWorker
import FerryCore
import FerryTestSupport
import Foundation
import PropertyBased
import Testing

/// Stores' notifications come from outside (`POST /notifications/s3`, or a
/// store's own Kafka target), so they get the same guarantee as requests,
/// checked on hostile variants of every store's shape:
/// - no payload stops the decoder: it yields changes or refuses with a reason;
/// - every change it yields can be published: its key and bucket pass Ferry's
///   rules, its size is a size, its metadata within S3's 2 KiB, its other
///   fields short, and the event and `objects` record built from it encode to
///   JSON that reads back, small enough for any broker. (A change that could
///   not be published was retried by the ingest role forever, holding its partition.)
@Suite struct StoreNotificationPropertyTests {
    /// What the ingest role publishes a change as, before it is sent.
    static let maxPublishedBytes = 64 << 10

    static let variants = Generator<HostileJSON.Variant, Shrink.None<HostileJSON.Variant>> { rng in
        HostileJSON.variant(of: NotificationSamples.all.randomElement(using: &rng)!, &rng)
    }

    @Test func everyNotificationIsRefusedOrPublishable() async {
        let events = EventBuilder(region: "us-east-1")
        let streams = StreamRecordBuilder(region: "us-east-1", topics: Topics())
        await propertyCheck(count: 2500, input: Self.variants) { variant in
            await Task.yield()
            let changes: [StoreNotification]
            switch Result(catching: { () throws(FerryError) in try StoreNotificationDecoder.decode(variant.bytes) }) {
            case .success(let decoded): changes = decoded
            case .failure(let error):
                #expect(!error.message.isEmpty, "\(variant.mutations)")
                return
            }
            for change in changes {
                let problems = Self.problems(of: change)
                #expect(problems.isEmpty, "\(variant.mutations): \(problems)")
                let event = events.event(for: change, sequencer: EventBuilder.sequencer(for: change))
                let record = streams.objectRecord(change: change, new: nil, old: nil)
                for (what, bytes) in [("event", try? FerryJSON.encode(event)), ("record", try? FerryJSON.encode(record))] {
                    guard let bytes else { Issue.record("\(variant.mutations): the \(what) does not encode"); continue }
                    #expect(bytes.count <= Self.maxPublishedBytes, "\(variant.mutations): the \(what) is \(bytes.count) bytes")
                }
                #expect((try? JSONDecoder().decode(S3Event.self, from: Data(FerryJSON.encode(event)))) == event)
                #expect((try? JSONDecoder().decode(DynamoDBEvent.Record.self, from: Data(FerryJSON.encode(record)))) == record)
            }
        }
    }

    static func problems(of change: StoreNotification) -> [String] {
        var problems: [String] = []
        if let problem = ObjectKeyRule.violation(of: change.key) { problems.append("key: \(problem)") }
        if let problem = RequestLimits.bucketNameProblem(change.bucket) { problems.append("bucket: \(problem)") }
        if let size = change.size, size < 0 { problems.append("size \(size)") }
        if change.isRemoval, change.size != nil { problems.append("a removal with a size") }
        let metadataBytes = (change.metadata ?? [:]).reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        if metadataBytes > MetadataRule.maxBytes { problems.append("metadata of \(metadataBytes) bytes") }
        let fields: [(String, String?)] = [
            ("eTag", change.eTag), ("versionId", change.versionId), ("sequencer", change.sequencer),
            ("principalId", change.principalId), ("requestId", change.requestId), ("hostId", change.hostId), ("region", change.region),
        ]
        for (name, value) in fields where (value?.utf8.count ?? 0) > StoreNotificationDecoder.maxFieldBytes {
            problems.append("\(name) of \(value!.utf8.count) bytes")
        }
        // Sent, or made of the bucket, key, event name and sequencer.
        if change.eventId.utf8.count > 4096 { problems.append("eventId of \(change.eventId.utf8.count) bytes") }
        if Timestamp.parse(change.eventTime) == nil { problems.append("eventTime \(change.eventTime)") }
        if !(change.eventName.hasPrefix("ObjectCreated:") || change.eventName.hasPrefix("ObjectRemoved:")) {
            problems.append("eventName \(change.eventName)")
        }
        return problems
    }
}
