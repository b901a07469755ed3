import FerryCore
@testable import FerryEngine
import FerryKafka
import FerryS3
import FerryLocalStore
import FerryStorage
import FerryStore
@testable import FerryWorker
import Foundation
import Logging
import Testing

/// The pieces of fleet semantics that need no cluster: which offsets may be
/// committed, and which multipart uploads the sweeper may abort.
@Suite struct FleetMechanicsTests {
    func message(_ partition: Int32, _ offset: Int64) -> KafkaMessage {
        KafkaMessage(topic: "ferry.requests", partition: partition, offset: offset, key: nil, value: [], headers: [])
    }

    /// Each finish writes an outbox row; a test says when the outbox has delivered (`outboxDelivers`).
    let outbox = RowPerFinishOutbox()

    /// The drainer delivers every row the outbox holds now.
    func outboxDelivers() {
        outbox.deliverAll()
    }

    func owned(_ partitions: TopicPartition...) -> OffsetTracker {
        OffsetTracker.owning(partitions, watermark: outbox.watermark)
    }

    @Test func onlyTheContiguousFinishedPrefixIsCommitted() {
        let p0 = TopicPartition(topic: "ferry.requests", partition: 0)
        let tracker = owned(p0)
        for o in Int64(0)...4 { #expect(tracker.begin(message(0, o))) }
        tracker.finish(message(0, 0))
        tracker.finish(message(0, 2))
        outboxDelivers()
        #expect(tracker.takeCommits() == [TopicPartitionOffset(topic: "ferry.requests", partition: 0, offset: 1)])
        tracker.finish(message(0, 1))
        outboxDelivers()
        #expect(tracker.takeCommits().map(\.offset) == [3])
        // A message handed off holds back everything after it.
        tracker.abandon(message(0, 3))
        tracker.finish(message(0, 4))
        outboxDelivers()
        #expect(tracker.takeCommits().isEmpty)
        #expect(tracker.inFlightCount(on: [p0]) == 0)
        // Messages of partitions this worker does not own are not begun.
        #expect(!tracker.begin(message(1, 0)))
    }

    @Test func nothingIsCommittedBeforeEarlierOwnersStartRecordsAreRead() {
        let p = TopicPartition(topic: "ferry.requests", partition: 0)
        let tracker = OffsetTracker(watermark: outbox.watermark)
        tracker.assign([p])
        #expect(tracker.begin(message(0, 7)))
        tracker.finish(message(0, 7))
        outboxDelivers()
        #expect(tracker.takeCommits().isEmpty, "committing now would overwrite the records unread")
        tracker.seedStarts([9: 1], for: p)
        #expect(tracker.takeCommits() == [TopicPartitionOffset(topic: "ferry.requests", partition: 0, offset: 8,
                                                                 metadata: "ferry-starts:v1:9=1")])
    }

    @Test func startRecordsRideOnCommitsUntilTheMessageHasAnOutcome() {
        let p = TopicPartition(topic: "ferry.requests", partition: 2)
        let tracker = owned(p)
        #expect(tracker.begin(message(2, 40)))
        #expect(tracker.begin(message(2, 41)))
        #expect(tracker.starts(of: message(2, 40)) == 0)
        #expect(tracker.recordStart(of: message(2, 40)) == 1)
        #expect(tracker.recordStart(of: message(2, 41)) == 1)
        let first = tracker.takeCommits()
        #expect(first.map(\.offset) == [40])
        #expect(StartRecords.decode(first.first?.metadata) == [40: 1, 41: 1])
        #expect(tracker.takeCommits().isEmpty, "nothing changed")
        tracker.finish(message(2, 40))
        outboxDelivers()
        let second = tracker.takeCommits()
        #expect(second.map(\.offset) == [41])
        #expect(StartRecords.decode(second.first?.metadata) == [41: 1])
        // Given back (shutdown, rebalance) is not a crash: the record goes.
        tracker.abandon(message(2, 41))
        #expect(tracker.takeCommits().first?.metadata == nil)
        // A failed commit is sent again.
        #expect(tracker.begin(message(2, 42)))
        _ = tracker.recordStart(of: message(2, 42))
        let third = tracker.takeCommits()
        tracker.commitFailed(third)
        #expect(tracker.takeCommits() == third)
    }

    @Test func startRecordsRoundTripAndIgnoreForeignMetadata() {
        let records: [Int64: Int] = [5: 1, 9_223_372_036_854_775_000: 3, 12: 2]
        #expect(StartRecords.decode(StartRecords.encode(records)) == records)
        #expect(StartRecords.encode([:]) == nil)
        #expect(StartRecords.decode("some other tool's metadata").isEmpty)
        #expect(StartRecords.decode("ferry-starts:v1:x=1,5=,=2,-4=1,7=0,8=2").isEmpty == false)
        #expect(StartRecords.decode("ferry-starts:v1:x=1,5=,=2,-4=1,7=0,8=2") == [8: 2])
        // Too many to fit: the most-started are kept, within Kafka's metadata limit.
        var many: [Int64: Int] = [:]
        for o in Int64(0)..<2000 { many[1_000_000_000 + o] = o == 1234 ? 5 : 1 }
        let text = StartRecords.encode(many)!
        #expect(text.utf8.count <= StartRecords.maxBytes)
        #expect(StartRecords.decode(text)[1_000_001_234] == 5)
    }

    /// While a rebalance releases a partition nothing new starts on it (the
    /// work in flight still ends as before), and other partitions carry on.
    @Test func aPartitionBeingReleasedStartsNothing() {
        let p = TopicPartition(topic: "ferry.requests", partition: 4)
        let q = TopicPartition(topic: "ferry.requests", partition: 5)
        let tracker = owned(p, q)
        #expect(tracker.begin(message(4, 1)))
        tracker.label(message(4, 1), transferId: "running")
        tracker.stopStarting([p])
        #expect(!tracker.owns(message(4, 1)) && !tracker.owns(message(4, 2)))
        #expect(!tracker.begin(message(4, 2)))
        #expect(tracker.owns(message(5, 1)) && tracker.begin(message(5, 1)))
        #expect(tracker.transfersInFlight(on: [p]) == ["running"])
        tracker.finish(message(4, 1))
        outboxDelivers()
        #expect(tracker.revoke([p]) == [TopicPartitionOffset(topic: "ferry.requests", partition: 4, offset: 2)])
        tracker.assign([p])  // given back later: it starts work again
        #expect(tracker.owns(message(4, 2)))
    }

    @Test func revokingReturnsTheFinishedPrefixAndForgetsThePartition() {
        let p = TopicPartition(topic: "ferry.requests", partition: 3)
        let tracker = owned(p)
        _ = tracker.begin(message(3, 10))
        _ = tracker.begin(message(3, 11))
        tracker.label(message(3, 10), transferId: "a")
        tracker.label(message(3, 11), transferId: "b")
        tracker.finish(message(3, 10))
        #expect(tracker.transfersInFlight(on: [p]) == ["b"])
        #expect(tracker.deliveryMark(on: [p]) != nil)
        outboxDelivers()
        #expect(tracker.deliveryMark(on: [p]) == nil)
        #expect(tracker.revoke([p]) == [TopicPartitionOffset(topic: "ferry.requests", partition: 3, offset: 11)])
        #expect(!tracker.owns(message(3, 12)))
        // A late finish for a partition that is gone changes nothing.
        tracker.finish(message(3, 11))
        #expect(tracker.takeCommits().isEmpty)
    }

    @Test func theSweeperAbortsOnlyItsOwnStaleUploads() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-sweep-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try LocalObjectStore(root: root.appendingPathComponent("store"))
        let state = try WorkerStateStore(directory: root.appendingPathComponent("state"))
        let location = ObjectLocation(bucket: "bkt", key: "k")
        let ours = try await store.createMultipartUpload(PutObjectInput(bucket: "bkt", key: "k"))
        let busy = try await store.createMultipartUpload(PutObjectInput(bucket: "bkt", key: "k"))
        let foreign = try await store.createMultipartUpload(PutObjectInput(bucket: "bkt", key: "k"))
        try await state.uploadStarted(transferId: "t-1", bucket: "bkt", key: "k", uploadId: ours)
        try await state.uploadStarted(transferId: "t-2", bucket: "bkt", key: "k", uploadId: busy)
        let inUse = UploadsInUse()
        #expect(inUse.claim(busy))
        let sweeper = UploadSweeper(state: state, store: store, inUse: inUse, age: 3600, logger: Logger(label: "test.sweep"))
        #expect(await sweeper.sweep() == 0, "nothing is old enough yet")
        #expect(await sweeper.sweep(now: Date().addingTimeInterval(7200)) == 1)
        let left = Set(try await store.listMultipartUploads(bucket: "bkt", prefix: "k").map(\.uploadId))
        #expect(left == [busy, foreign], "the busy upload and someone else's are kept")
        #expect(try await state.openUploads(createdBefore: Date().addingTimeInterval(7200)).map(\.uploadId) == [busy])

        // Young uploads go at once when their transfer is finished: here (finished set)…
        let finishedHere = try await store.createMultipartUpload(PutObjectInput(bucket: "bkt", key: "k"))
        try await state.uploadStarted(transferId: "t-done", bucket: "bkt", key: "k", uploadId: finishedHere)
        try await state.recordFinished(TransferStatus(id: "t-done", op: "upload", state: .completed))
        // …or by another worker: the object carries the transfer id.
        let elsewhere = try await store.createMultipartUpload(PutObjectInput(bucket: "bkt", key: "other"))
        try await state.uploadStarted(transferId: "t-elsewhere", bucket: "bkt", key: "other", uploadId: elsewhere)
        _ = try await store.putObject(PutObjectInput(bucket: "bkt", key: "other", metadata: [TransferMarker.transferId: "t-elsewhere"]),
                                      body: .bytes([1, 2, 3]))
        // A young upload of a transfer still running elsewhere stays.
        let running = try await store.createMultipartUpload(PutObjectInput(bucket: "bkt", key: "third"))
        try await state.uploadStarted(transferId: "t-running", bucket: "bkt", key: "third", uploadId: running)
        #expect(await sweeper.sweep() == 2)
        let remaining = Set(try await store.listMultipartUploads(bucket: "bkt", prefix: "").map(\.uploadId))
        #expect(remaining == [busy, foreign, running])
        _ = location
    }
}
