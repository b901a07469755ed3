import FerryCore
@testable import FerryEngine
import FerryS3
import FerryLocalStore
import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// Invariant: an upload the store completed is reported completed, even when
/// the answer to CompleteMultipartUpload was lost and the retry finds the
/// upload gone (NoSuchUpload); and only when the object there is the one
/// these parts make (its ETag), never another version written meanwhile.
@Suite struct LostCompletionTests {
    /// A directory with a data root and a local store, the store seen through a `CountingStore`.
    static func scene(_ label: String) throws -> (base: URL, root: URL, real: LocalObjectStore, store: CountingStore) {
        let base = try TestPaths.temporaryDirectory(label)
        let root = base.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let real = try LocalObjectStore(root: base.appendingPathComponent("store"))
        return (base, root, real, CountingStore(real))
    }

    @Test(arguments: [false, true])
    func aCompletionWhoseAnswerWasLostIsRecognised(replacedMeanwhile: Bool) async throws {
        let (base, root, real, store) = try Self.scene("lost-completion")
        defer { try? FileManager.default.removeItem(at: base) }
        let engine = try SourceChangeTests.engine(store, dataRoot: root) {
            $0.multipartThreshold = 5 << 20; $0.partSize = 5 << 20
            $0.retryPolicy = RetryPolicy(retryLimit: 3, baseDelaySeconds: 0.01)
        }
        let file = root.appendingPathComponent("big.bin")
        let bytes = (0..<(11 << 20) + 3).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 10) }
        try Data(bytes).write(to: file)
        store.completionAnswersToLose.withLock { $0 = 1 }
        if replacedMeanwhile {
            // Another writer puts its own version between the completion and the retry.
            store.afterLostAnswer.withLock {
                $0 = { _ = try? await real.putObject(PutObjectInput(bucket: "bkt", key: "big.bin"), body: .bytes([1, 2, 3]), progress: nil) }
            }
        }
        let job = TransferJob(request: TransferRequest(id: "lost-\(replacedMeanwhile)", op: .upload, bucket: "bkt", key: "big.bin",
                                                       source: file.absoluteString), objectKey: "big.bin")
        let result: Result<TransferOutcome, FerryError>
        do { result = .success(try await engine.run(job)) } catch { result = .failure(error) }
        let object = try #require(try await real.headObject(bucket: "bkt", key: "big.bin", headers: [:]))
        switch (replacedMeanwhile, result) {
        case (false, .success(let outcome)):
            // Reported as the object the parts made, each part sent once.
            #expect(outcome.object.eTag == object.eTag && object.eTag?.hasSuffix("-3\"") == true, "\(outcome.object) vs \(object)")
            #expect(object.size == Int64(bytes.count))
            #expect(store.uploadedParts.withLock { $0.sorted() } == [1, 2, 3])
        case (true, .failure(let error)):
            // Not taken for this upload's object: the retry's NoSuchUpload stands.
            #expect(error.code == .noSuchUpload, "\(error)")
            #expect(object.size == 3)
        default:
            Issue.record("replaced meanwhile: \(replacedMeanwhile), result: \(result)")
        }
    }

    /// A cancel that lands after a PUT's last byte, before the store's answer,
    /// aborts a request the store completed: the object stands and the transfer
    /// is reported completed (the worker then announces it), never `cancelled`
    /// with its object stored and unannounced. A cancel before the store took
    /// the object still cancels: nothing is stored.
    @Test func aCancelAfterTheStoreTookThePutReportsTheObject() async throws {
        let (base, root, real, store) = try Self.scene("cancel-after-put")
        defer { try? FileManager.default.removeItem(at: base) }
        let engine = try SourceChangeTests.engine(store, dataRoot: root) { _ in }
        let file = root.appendingPathComponent("small.bin")
        try Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }).write(to: file)
        func job(_ id: String, key: String) -> TransferJob {
            var request = TransferRequest(id: id, op: .upload, bucket: "bkt", key: key, source: file.absoluteString)
            request.metadata = [TransferMarker.transferId: id]
            return TransferJob(request: request, objectKey: key)
        }
        let control = TransferControl()
        store.afterPutStored.withLock { $0 = { control.cancel() } }
        let outcome = try await engine.run(job("late-cancel", key: "small.bin"), control: control)
        let object = try #require(try await real.headObject(bucket: "bkt", key: "small.bin", headers: [:]))
        #expect(outcome.object.eTag == object.eTag && outcome.object.size == 70_000)
        #expect(outcome.eventName == "ObjectCreated:Put")

        // Cancelled before anything was stored: cancelled, and the key stays empty.
        store.afterPutStored.withLock { $0 = nil }
        let early = TransferControl()
        early.cancel()
        let result: Result<TransferOutcome, FerryError>
        do { result = .success(try await engine.run(job("early-cancel", key: "never.bin"), control: early)) } catch { result = .failure(error) }
        if case .failure(let error) = result { #expect(error.code == .cancelled) } else { Issue.record("a transfer cancelled before it started completed") }
        #expect(try await real.headObject(bucket: "bkt", key: "never.bin", headers: [:]) == nil)
    }

    /// The ETag of an upload in parts: the MD5 of the parts' MD5s in part order,
    /// whatever order or case the part ETags come in; nothing for ETags that are
    /// not MD5s. (Ceph RGW's ETags for boto3's uploads match it: see docs/operators/limits.md.)
    @Test func theMultipartETagIsTheMD5OfThePartsMD5s() {
        let a = Digest.md5(Array("part one".utf8)), b = Digest.md5(Array("part two".utf8))
        let parts = [CompletedPart(partNumber: 2, eTag: "\"\(b.hexString)\"", size: 8),
                     CompletedPart(partNumber: 1, eTag: a.hexString.uppercased(), size: 8)]
        #expect(MultipartETag.of(parts) == "\"\(Digest.md5(a + b).hexString)-2\"")
        #expect(MultipartETag.of([CompletedPart(partNumber: 1, eTag: "\"not-an-md5\"", size: 1)]) == nil)
        #expect(MultipartETag.of([CompletedPart(partNumber: 1, eTag: "\"" + String(repeating: "g", count: 32) + "\"", size: 1)]) == nil)
        #expect(MultipartETag.of([]) == nil)
    }
}
