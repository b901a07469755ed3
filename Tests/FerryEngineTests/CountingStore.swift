import FerryCore
import FerryS3
import FerryStorage
import Synchronization

/// Forwards every call to a real store and counts the part requests, so tests
/// can see what was sent (not a mock: the server still does the work).
final class CountingStore: ObjectStore {
    let base: any ObjectStore
    let uploadedParts = Mutex<[Int]>([])
    let rangedGets = Mutex(0)
    let copiedParts = Mutex<[Int]>([])
    /// Each PutObject's `ifNoneMatch`, in order.
    let puts = Mutex<[Bool]>([])
    let heads = Mutex(0)
    let conditionalWrites: ConditionalWrites
    /// Sends every PUT without `If-None-Match`: a store that ignores the header.
    let dropsIfNoneMatch: Bool
    /// Runs after each part is stored (the part's number), before the engine hears of it.
    let afterPart = Mutex<(@Sendable (Int) -> Void)?>(nil)
    /// Runs before each part is sent (the part's number) and before each ranged GET
    /// (the range's first byte); a throw is that request's failure.
    let beforePart = Mutex<(@Sendable (Int) async throws(FerryError) -> Void)?>(nil)
    let beforeRangedGet = Mutex<(@Sendable (Int64) async throws(FerryError) -> Void)?>(nil)
    /// Runs after each part is copied (the part's number), before the engine hears of it.
    let afterPartCopy = Mutex<(@Sendable (Int) async -> Void)?>(nil)

    /// CompleteMultipartUploads still to lose their answer: the store completes the
    /// upload, then the call fails as a reset connection would, after `afterLostAnswer`.
    let completionAnswersToLose = Mutex(0)
    let afterLostAnswer = Mutex<(@Sendable () async -> Void)?>(nil)

    /// `conditionalWrites`: what the engine is told of the store (default: the base store's own).
    init(_ base: any ObjectStore, conditionalWrites: ConditionalWrites? = nil, dropsIfNoneMatch: Bool = false) {
        self.base = base
        self.conditionalWrites = conditionalWrites ?? base.conditionalWrites
        self.dropsIfNoneMatch = dropsIfNoneMatch
    }

    /// Runs once a PUT is stored, before its answer; the answer then waits until
    /// the call is cancelled, and is lost (as when a cancel aborts the request).
    let afterPutStored = Mutex<(@Sendable () -> Void)?>(nil)

    func putObject(_ input: PutObjectInput, body: ObjectBody, progress: TransferMeter?) async throws(FerryError) -> ObjectWriteResult {
        puts.withLock { $0.append(input.ifNoneMatch) }
        var sent = input
        if dropsIfNoneMatch { sent.ifNoneMatch = false }
        let result = try await base.putObject(sent, body: body, progress: progress)
        guard let hook = afterPutStored.withLock({ $0 }) else { return result }
        hook()
        try? await Task.sleep(for: .seconds(30))
        throw FerryError(.connectionError, "PUT: the request was aborted before its answer")
    }
    func getObject(_ input: GetObjectInput, into descriptor: Int32, at offset: Int64, progress: TransferMeter?) async throws(FerryError) -> ObjectAttributes {
        if let range = input.range {
            rangedGets.withLock { $0 += 1 }
            try await beforeRangedGet.withLock { $0 }?(range.lowerBound)
        }
        return try await base.getObject(input, into: descriptor, at: offset, progress: progress)
    }
    func headObject(bucket: String, key: String, headers: [String: String]) async throws(FerryError) -> ObjectAttributes? {
        heads.withLock { $0 += 1 }
        return try await base.headObject(bucket: bucket, key: key, headers: headers)
    }
    func wholeObjectChecksum(_ location: ObjectLocation, eTag: String, headers: [String: String]) async throws(FerryError) -> WholeObjectChecksum? {
        try await base.wholeObjectChecksum(location, eTag: eTag, headers: headers)
    }
    func copyObject(_ input: CopyObjectInput) async throws(FerryError) -> ObjectWriteResult {
        try await base.copyObject(input)
    }
    func deleteObject(bucket: String, key: String) async throws(FerryError) -> ObjectWriteResult {
        try await base.deleteObject(bucket: bucket, key: key)
    }
    func createMultipartUpload(_ input: PutObjectInput) async throws(FerryError) -> String {
        try await base.createMultipartUpload(input)
    }
    func uploadPart(_ location: ObjectLocation, uploadId: String, partNumber: Int, body: ObjectBody,
                    checksum: ChecksumAlgorithm?, headers: [String: String], progress: TransferMeter?) async throws(FerryError) -> CompletedPart {
        uploadedParts.withLock { $0.append(partNumber) }
        try await beforePart.withLock { $0 }?(partNumber)
        let stored = try await base.uploadPart(location, uploadId: uploadId, partNumber: partNumber, body: body,
                                               checksum: checksum, headers: headers, progress: progress)
        afterPart.withLock { $0 }?(partNumber)
        return stored
    }
    func completeMultipartUpload(_ location: ObjectLocation, uploadId: String, parts: [CompletedPart],
                                 headers: [String: String], wholeChecksum: WholeObjectChecksum?) async throws(FerryError) -> ObjectWriteResult {
        let result = try await base.completeMultipartUpload(location, uploadId: uploadId, parts: parts, headers: headers,
                                                            wholeChecksum: wholeChecksum)
        let lose = completionAnswersToLose.withLock { left in defer { left = max(0, left - 1) }; return left > 0 }
        guard lose else { return result }
        await afterLostAnswer.withLock { $0 }?()
        throw FerryError(.connectionError, "POST CompleteMultipartUpload: Connection reset by peer (curl 56)")
    }
    func abortMultipartUpload(_ location: ObjectLocation, uploadId: String) async throws(FerryError) {
        try await base.abortMultipartUpload(location, uploadId: uploadId)
    }
    func listParts(_ location: ObjectLocation, uploadId: String) async throws(FerryError) -> [CompletedPart] {
        try await base.listParts(location, uploadId: uploadId)
    }
    func listMultipartUploads(bucket: String, prefix: String) async throws(FerryError) -> [MultipartUploadSummary] {
        try await base.listMultipartUploads(bucket: bucket, prefix: prefix)
    }
}

extension CountingStore {
    func uploadPartCopy(_ location: ObjectLocation, uploadId: String, partNumber: Int, source: ObjectLocation,
                        range: ClosedRange<Int64>, headers: [String: String]) async throws(FerryError) -> CompletedPart {
        copiedParts.withLock { $0.append(partNumber) }
        let copied = try await base.uploadPartCopy(location, uploadId: uploadId, partNumber: partNumber, source: source, range: range,
                                                   headers: headers)
        if let hook = afterPartCopy.withLock({ $0 }) { await hook(partNumber) }
        return copied
    }
}
