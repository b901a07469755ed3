import FerryCore
import FerryStorage
import Foundation
import Logging
import Metrics
import Synchronization
import FerryConcurrency

/// How a request raced against a pause ended.
enum PausableOutcome<T: Sendable>: Sendable {
    case finished(Result<T, FerryError>)
    case interrupted
}

/// One transfer while it runs: its settings, control and progress. The
/// operations live in extensions (Operations/).
struct TransferRun: Sendable {
    let job: TransferJob
    let settings: TransferSettings
    let control: TransferControl
    let store: any ObjectStore
    let dataRoot: DataRoot
    let remoteSources: (any RemoteSourceReader)?
    let chunks: (any ChunkFetcher)?
    let journal: (any TransferJournal)?
    /// Asked when a storage request gets no answer, before it is retried.
    let outageCheck: (any OutageCheck)?
    let uploadsInUse: UploadsInUse
    /// Its hold on the engine's limit of transfers at once.
    let slot: TransferSlot
    let progress: @Sendable (TransferProgress) -> Void
    let logger: Logger
    /// The total size, once known (-1 before).
    let totalBytes = TotalBytes()

    var request: TransferRequest { job.request }
    var location: ObjectLocation { ObjectLocation(bucket: request.bucket, key: job.objectKey) }
    var meter: TransferMeter { control.meter }

    final class PartCounter: Sendable {
        let value: Atomic<Int>
        init(_ initial: Int) { value = Atomic(initial) }
    }

    final class TotalBytes: Sendable {
        let value = Atomic<Int64>(-1)
    }

    func setTotal(_ bytes: Int64) {
        totalBytes.value.store(bytes, ordering: .relaxed)
        report()
    }

    func report() {
        let total = totalBytes.value.load(ordering: .relaxed)
        progress(TransferProgress(bytesTransferred: meter.value, totalBytes: total < 0 ? nil : total))
    }

    /// Asked before each retry: a store that is down gets no retry (each could
    /// wait out the low-speed cut-off), once the outage check confirms it.
    var stopsRetryingIntoAnOutage: @Sendable (FerryError) async -> Bool {
        { [outageCheck] error in
            guard error.isStoreNoAnswer, let outageCheck else { return false }
            return await outageCheck.confirmsOutage(error)
        }
    }

    /// Runs one storage request with the transfer's retry policy; a cancelled
    /// transfer fails with its cancel reason instead of retrying. A pause
    /// aborts the request at once (no byte moves while paused) and sends it
    /// again on resume, without counting a retry; `interruptible: false` is
    /// for server-side work a pause cannot stop (CopyObject, completing or
    /// aborting an upload), which is paused only before it starts.
    func attempt<T: Sendable>(_ what: String, interruptible: Bool = true,
                              _ body: @escaping @Sendable () async throws(FerryError) -> T) async throws(FerryError) -> T {
        do {
            return try await settings.retryPolicy.run(onRetry: { n, error in
                logger.warning("retrying \(what)", metadata: ["retry": "\(n)", "error": "\(error)"])
                // "UploadPart 3" counts as UploadPart.
                let operation = what.split(separator: " ").first.map(String.init) ?? what
                Counter(label: "ferry_retries_total", dimensions: [("operation", operation), ("code", error.code.rawValue)]).increment()
            }, stopsRetrying: stopsRetryingIntoAnOutage) { () async throws(FerryError) -> T in
                while true {
                    try await control.checkpoint()
                    guard interruptible else { return try await body() }
                    if let value = try await untilPaused(body) { return value }
                    // A pause, or this task's cancellation (a sibling part failed): the
                    // checkpoint then throws, so a cut request is never sent again at once.
                    if !Task.isCancelled { logger.info("\(what) stopped by a pause; it is sent again on resume") }
                }
            }
        } catch {
            throw control.cancellationReason ?? error
        }
    }

    /// Runs `body` until it ends or the transfer is paused or cancelled, or the
    /// calling task is cancelled, whichever comes first; nil when interrupted
    /// (the body's task is cancelled, which aborts its HTTP request, and awaited).
    private func untilPaused<T: Sendable>(_ body: @escaping @Sendable () async throws(FerryError) -> T) async throws(FerryError) -> T? {
        let control = self.control
        let outcome = await withTaskGroup(of: PausableOutcome<T>.self) { group in
            group.addTask {
                do throws(FerryError) { return .finished(.success(try await body())) } catch { return .finished(.failure(error)) }
            }
            group.addTask { await control.untilInterrupted(); return .interrupted }
            var outcome = await group.next()!
            group.cancelAll()
            // The aborted request has ended before anything else starts; if it got its
            // answer after all (the pause came as it finished), that answer is kept.
            while let late = await group.next() {
                if case .finished(.success) = late { outcome = late }
            }
            return outcome
        }
        switch outcome {
        case .finished(let result): return try result.get()
        case .interrupted: return nil
        }
    }

    /// Runs `work` for each item with at most `concurrency` at once, starting
    /// each only after the control's checkpoint (so pause stops new ones).
    func forEachConcurrently<Item: Sendable, Result: Sendable>(
        _ items: [Item], concurrency: Int, _ work: @escaping @Sendable (Item) async throws(FerryError) -> Result
    ) async throws(FerryError) -> [Result] {
        do {
            return try await withThrowingTaskGroup(of: Result.self) { group in
                var results: [Result] = []
                var iterator = items.makeIterator()
                var running = 0
                func startNext() async throws -> Bool {
                    guard let item = iterator.next() else { return false }
                    try await control.checkpoint()
                    group.addTask { try await work(item) }
                    running += 1
                    return true
                }
                while running < concurrency, try await startNext() {}
                while let result = try await group.next() {
                    running -= 1
                    results.append(result)
                    _ = try await startNext()
                }
                return results
            }
        } catch {
            throw control.cancellationReason ?? ferryError(error)
        }
    }

    /// Checks a stored part against the bytes this transfer would send: true
    /// when they are the same. Without one, only journaled parts are trusted.
    typealias PartVerifier = @Sendable (PartPlan.Part, CompletedPart) throws(FerryError) -> Bool

    /// A multipart upload's frame: find the upload to continue (this transfer's
    /// journaled one, or one an interrupted run left on the key whose parts
    /// match these bytes) or CreateMultipartUpload; `part` for each planned part
    /// not yet stored (at most `partConcurrency` at once, each retried on its
    /// own and journaled); then CompleteMultipartUpload with the parts in order.
    /// A failure, cancel or timeout aborts the upload; a hand-off keeps it.
    func multipart(_ input: PutObjectInput, plan: PartPlan, verify: PartVerifier? = nil,
                   beforeComplete: (@Sendable () async throws(FerryError) -> Void)? = nil,
                   part: @escaping @Sendable (_ uploadId: String, _ part: PartPlan.Part) async throws(FerryError) -> CompletedPart)
        async throws(FerryError) -> ObjectWriteResult {
        let (uploadId, stored, created) = try await uploadToContinue(input, plan: plan, verify: verify)
        defer { uploadsInUse.release(uploadId) }
        let remaining = plan.parts.filter { stored[$0.number] == nil }
        if !stored.isEmpty {
            meter.add(stored.values.reduce(0) { $0 + $1.size })
            logger.info("resuming multipart upload", metadata: ["uploadId": "\(uploadId)", "storedParts": "\(stored.count)",
                                                                "remainingParts": "\(remaining.count)"])
        } else {
            logger.debug("multipart upload started", metadata: ["uploadId": "\(uploadId)", "parts": "\(plan.count)",
                                                                 "partSize": "\(plan.partSize)"])
        }
        let location = input.location
        let journal = self.journal
        let partsStored = PartCounter(stored.count)
        do {
            let sent = try await forEachConcurrently(remaining, concurrency: settings.partConcurrency) { (p) async throws(FerryError) -> CompletedPart in
                let done = try await part(uploadId, p)
                partsStored.value.add(1, ordering: .relaxed)
                await journal?.partUploaded(uploadId: uploadId, part: done)
                return done
            }
            try await control.checkpoint()
            // The parts must be of one version of their source (a file, an object).
            try await beforeComplete?()
            let parts = (Array(stored.values) + sent).sorted { $0.partNumber < $1.partNumber }
            // An upload this run started with a CRC keeps a CRC of the whole object
            // (`FULL_OBJECT`): made from the parts', for the store to check what it
            // assembles. One resumed may have been started otherwise (by an older
            // version, as a composite), so its completion names none.
            let whole = created ? input.checksum.flatMap { WholeObjectChecksum.combining(parts, algorithm: $0) } : nil
            let store = self.store
            let attempts = PartCounter(0)
            // Of these the store sends the SSE-C key (an SSE-C object is read back only with it).
            let headers = input.headers
            let result = try await attempt("CompleteMultipartUpload", interruptible: false) { () async throws(FerryError) -> ObjectWriteResult in
                let earlier = attempts.value.add(1, ordering: .relaxed).oldValue
                do throws(FerryError) {
                    return try await store.completeMultipartUpload(location, uploadId: uploadId, parts: parts, headers: headers,
                                                                   wholeChecksum: whole)
                } catch where error.code == .noSuchUpload && earlier > 0 {
                    // An attempt before may have completed the upload and lost its answer
                    // (a reset connection): then the object is made of exactly these parts.
                    guard let done = try await Self.objectCompleted(from: parts, at: location, headers: headers, in: store) else { throw error }
                    return done
                }
            }
            await journal?.uploadEnded(uploadId: uploadId)
            return result
        } catch {
            // Kept for whoever resumes — unless it holds no part yet, when there is nothing to save.
            if control.isHandedOff && partsStored.value.load(ordering: .relaxed) > 0 {
                logger.info("keeping multipart upload for whoever resumes this transfer", metadata: ["uploadId": "\(uploadId)"])
                throw error
            }
            logger.info("aborting multipart upload", metadata: ["uploadId": "\(uploadId)", "reason": "\(error)"])
            await abortFailedUpload(uploadId)
            throw error
        }
    }

    /// Aborts the upload of a transfer that failed, also when this transfer was
    /// cancelled (the abort itself must go out), with the retries any request
    /// gets. When it still fails, says who removes the upload: the worker's
    /// sweeper (a journal), or the one who reads the line (`ferry cp`).
    private func abortFailedUpload(_ uploadId: String) async {
        let (store, location, policy, stops) = (self.store, self.location, settings.retryPolicy, stopsRetryingIntoAnOutage)
        let aborted = await withoutCancellation { () -> Result<Void, FerryError> in
            do throws(FerryError) {
                try await policy.run(stopsRetrying: stops) { () async throws(FerryError) in
                    try await store.abortMultipartUpload(location, uploadId: uploadId)
                }
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        switch aborted {
        case .success:
            await journal?.uploadEnded(uploadId: uploadId)
        case .failure(let abortError) where journal != nil:
            logger.error("cannot abort multipart upload \(uploadId) of \(location): \(abortError); the sweeper tries again later")
        case .failure(let abortError):
            logger.error("""
                cannot abort multipart upload \(uploadId) of \(location): \(abortError). It stays on the store, holding \
                its parts, until it is aborted: ferry uploads \(ShellWord.quoted("\(location)")) --abort --upload-id \(ShellWord.quoted(uploadId))
                """)
        }
    }

    /// The object at `location` when its ETag is the one S3 gives an upload of
    /// `parts` (nil when it is not, or cannot be known: part ETags that are not MD5s).
    static func objectCompleted(from parts: [CompletedPart], at location: ObjectLocation, headers: [String: String],
                                in store: any ObjectStore) async throws(FerryError) -> ObjectWriteResult? {
        guard let expected = MultipartETag.of(parts),
              let object = try await store.headObject(bucket: location.bucket, key: location.key, headers: headers),
              object.eTag == expected else { return nil }
        return ObjectWriteResult(eTag: object.eTag, versionId: object.versionId, requestId: "", hostId: "")
    }

    /// The upload to send the parts to, the parts it holds already, and
    /// whether it was created now (not resumed).
    private func uploadToContinue(_ input: PutObjectInput, plan: PartPlan, verify: PartVerifier?)
        async throws(FerryError) -> (String, [Int: CompletedPart], created: Bool) {
        let location = input.location
        // 1. This transfer's own upload, from the journal (same worker after a restart).
        if let journal, let saved = await journal.openUpload(transferId: request.id, location: location),
           uploadsInUse.claim(saved.uploadId) {
            let trusted = Dictionary(saved.parts.map { ($0.partNumber, $0) }, uniquingKeysWith: { a, _ in a })
            if let stored = try await storedParts(location, uploadId: saved.uploadId, plan: plan, trusted: trusted,
                                                  verify: verify, requireAll: false) {
                return (saved.uploadId, stored, false)
            }
            uploadsInUse.release(saved.uploadId)
            await journal.uploadEnded(uploadId: saved.uploadId)
        }
        // 2. An upload an interrupted run (another worker) left on this key:
        //    adopted only when every part it holds has this plan's size and these bytes.
        if let verify {
            let candidates = try await attempt("ListMultipartUploads") { () async throws(FerryError) -> [MultipartUploadSummary] in
                try await store.listMultipartUploads(bucket: location.bucket, prefix: location.key)
            }.filter { $0.key == location.key }
                .sorted { ($0.initiated ?? .distantPast) > ($1.initiated ?? .distantPast) }
            for candidate in candidates.prefix(8) where uploadsInUse.claim(candidate.uploadId) {
                if let stored = try? await storedParts(location, uploadId: candidate.uploadId, plan: plan, trusted: [:],
                                                       verify: verify, requireAll: true), !stored.isEmpty {
                    logger.info("adopting the multipart upload of an interrupted run",
                                metadata: ["uploadId": "\(candidate.uploadId)", "verifiedParts": "\(stored.count)"])
                    await journal?.uploadStarted(transferId: request.id, location: location, uploadId: candidate.uploadId)
                    for part in stored.values { await journal?.partUploaded(uploadId: candidate.uploadId, part: part) }
                    return (candidate.uploadId, stored, false)
                }
                uploadsInUse.release(candidate.uploadId)
            }
        }
        // 3. A new upload.
        let uploadId = try await attempt("CreateMultipartUpload") { () async throws(FerryError) -> String in
            try await store.createMultipartUpload(input)
        }
        _ = uploadsInUse.claim(uploadId)
        await journal?.uploadStarted(transferId: request.id, location: location, uploadId: uploadId)
        return (uploadId, [:], true)
    }

    /// The parts S3 holds for `uploadId` that can be kept: sizes as planned,
    /// and either journaled with the same ETag or verified against the bytes.
    /// Nil when the upload is gone, or (with `requireAll`) when any part does
    /// not match — then it is not this transfer's upload.
    private func storedParts(_ location: ObjectLocation, uploadId: String, plan: PartPlan, trusted: [Int: CompletedPart],
                             verify: PartVerifier?, requireAll: Bool) async throws(FerryError) -> [Int: CompletedPart]? {
        let listed: [CompletedPart]
        do {
            listed = try await attempt("ListParts") { () async throws(FerryError) -> [CompletedPart] in
                try await store.listParts(location, uploadId: uploadId)
            }
        } catch where error.code == .noSuchUpload {
            return nil
        }
        var kept: [Int: CompletedPart] = [:]
        let plannedParts = plan.parts
        for part in listed {
            let planned = part.partNumber >= 1 && part.partNumber <= plannedParts.count ? plannedParts[part.partNumber - 1] : nil
            let matches: Bool
            if let planned, planned.length == part.size {
                if let known = trusted[part.partNumber], known.eTag == part.eTag {
                    matches = true
                } else {
                    if let verify {  // re-reads a part of the file: on the blocking pool
                        matches = try await BlockingPool.shared.run { () throws(FerryError) -> Bool in try verify(planned, part) }
                    } else {
                        matches = false
                    }
                }
            } else {
                matches = false
            }
            if matches { kept[part.partNumber] = part } else if requireAll { return nil }
        }
        return kept
    }
}
