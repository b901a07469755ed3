import FerryCore
@testable import FerryEngine
import FerryKafka
import FerryS3
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

    @Test func onlyTheContiguousFinishedPrefixIsCommitted() {
        let tracker = OffsetTracker()
        let p0 = TopicPartition(topic: "ferry.requests", partition: 0)
        tracker.assign([p0])
        for o in Int64(0)...4 { #expect(tracker.begin(message(0, o), transferId: "t\(o)")) }
        tracker.finish(message(0, 0))
        tracker.finish(message(0, 2))
        #expect(tracker.takeCommittable() == [TopicPartitionOffset(topic: "ferry.requests", partition: 0, offset: 1)])
        tracker.finish(message(0, 1))
        #expect(tracker.takeCommittable().map(\.offset) == [3])
        // A message handed off holds back everything after it.
        tracker.abandon(message(0, 3))
        tracker.finish(message(0, 4))
        #expect(tracker.takeCommittable().isEmpty)
        #expect(tracker.inFlightCount(on: [p0]) == 0)
        // Messages of partitions this worker does not own are not begun.
        #expect(!tracker.begin(message(1, 0), transferId: nil))
    }

    @Test func revokingReturnsTheFinishedPrefixAndForgetsThePartition() {
        let tracker = OffsetTracker()
        let p = TopicPartition(topic: "ferry.requests", partition: 3)
        tracker.assign([p])
        _ = tracker.begin(message(3, 10), transferId: "a")
        _ = tracker.begin(message(3, 11), transferId: "b")
        tracker.finish(message(3, 10))
        #expect(tracker.transfersInFlight(on: [p]) == ["b"])
        #expect(tracker.revoke([p]) == [TopicPartitionOffset(topic: "ferry.requests", partition: 3, offset: 11)])
        #expect(!tracker.owns(message(3, 12)))
        // A late finish for a partition that is gone changes nothing.
        tracker.finish(message(3, 11))
        #expect(tracker.takeCommittable().isEmpty)
    }

    @Test func theSweeperAbortsOnlyItsOwnStaleUploads() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-sweep-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try LocalObjectStore(root: root.appendingPathComponent("store"))
        let state = try WorkerStateStore(directory: root.appendingPathComponent("state"))
        let location = ObjectLocation(bucket: "b", key: "k")
        let ours = try await store.createMultipartUpload(PutObjectInput(bucket: "b", key: "k"))
        let busy = try await store.createMultipartUpload(PutObjectInput(bucket: "b", key: "k"))
        let foreign = try await store.createMultipartUpload(PutObjectInput(bucket: "b", key: "k"))
        try await state.uploadStarted(transferId: "t-1", bucket: "b", key: "k", uploadId: ours)
        try await state.uploadStarted(transferId: "t-2", bucket: "b", key: "k", uploadId: busy)
        let inUse = UploadsInUse()
        #expect(inUse.claim(busy))
        let sweeper = UploadSweeper(state: state, store: store, inUse: inUse, age: 3600, logger: Logger(label: "test.sweep"))
        #expect(await sweeper.sweep() == 0, "nothing is old enough yet")
        #expect(await sweeper.sweep(now: Date().addingTimeInterval(7200)) == 1)
        let left = Set(try await store.listMultipartUploads(bucket: "b", prefix: "k").map(\.uploadId))
        #expect(left == [busy, foreign], "the busy upload and someone else's are kept")
        #expect(try await state.openUploads(createdBefore: Date().addingTimeInterval(7200)).map(\.uploadId) == [busy])

        // Young uploads go at once when their transfer is finished: here (finished set)…
        let finishedHere = try await store.createMultipartUpload(PutObjectInput(bucket: "b", key: "k"))
        try await state.uploadStarted(transferId: "t-done", bucket: "b", key: "k", uploadId: finishedHere)
        try await state.recordFinished(TransferStatus(id: "t-done", op: "upload", state: .completed))
        // …or by another worker: the object carries the transfer id.
        let elsewhere = try await store.createMultipartUpload(PutObjectInput(bucket: "b", key: "other"))
        try await state.uploadStarted(transferId: "t-elsewhere", bucket: "b", key: "other", uploadId: elsewhere)
        _ = try await store.putObject(PutObjectInput(bucket: "b", key: "other", metadata: [TransferMarker.transferId: "t-elsewhere"]),
                                      body: .bytes([1, 2, 3]))
        // A young upload of a transfer still running elsewhere stays.
        let running = try await store.createMultipartUpload(PutObjectInput(bucket: "b", key: "third"))
        try await state.uploadStarted(transferId: "t-running", bucket: "b", key: "third", uploadId: running)
        #expect(await sweeper.sweep() == 2)
        let remaining = Set(try await store.listMultipartUploads(bucket: "b", prefix: "").map(\.uploadId))
        #expect(remaining == [busy, foreign, running])
        _ = location
    }
}
