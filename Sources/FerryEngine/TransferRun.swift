import FerryCore
import FerryS3
import Foundation
import Logging
import Synchronization

/// One transfer while it runs: its settings, control and progress. The
/// operations live in extensions (Operations/).
struct TransferRun: Sendable {
    let job: TransferJob
    let settings: TransferSettings
    let control: TransferControl
    let store: any ObjectStore
    let dataRoot: DataRoot
    let remoteSources: RemoteSourceFetcher?
    let progress: @Sendable (TransferProgress) -> Void
    let logger: Logger
    /// The total size, once known (-1 before).
    let totalBytes = TotalBytes()

    var request: TransferRequest { job.request }
    var location: ObjectLocation { ObjectLocation(bucket: request.bucket, key: job.objectKey) }
    var meter: TransferMeter { control.meter }

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

    /// Runs one storage request with the transfer's retry policy; a cancelled
    /// transfer fails with its cancel reason instead of retrying.
    func attempt<T: Sendable>(_ what: String, _ body: () async throws(FerryError) -> T) async throws(FerryError) -> T {
        do {
            return try await settings.retryPolicy.run(onRetry: { n, error in
                logger.warning("retrying \(what)", metadata: ["retry": "\(n)", "error": "\(error)"])
            }) { () async throws(FerryError) -> T in
                try await control.checkpoint()
                return try await body()
            }
        } catch {
            throw control.cancellationReason ?? error
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

    /// A multipart upload's frame: CreateMultipartUpload, `part` for each planned
    /// part (at most `partConcurrency` at once, each retried on its own), then
    /// CompleteMultipartUpload with the parts in order. Any failure, cancel or
    /// timeout aborts the upload, so no parts are left behind.
    func multipart(_ input: PutObjectInput, plan: PartPlan,
                   part: @escaping @Sendable (_ uploadId: String, _ part: PartPlan.Part) async throws(FerryError) -> CompletedPart)
        async throws(FerryError) -> ObjectWriteResult {
        let uploadId = try await attempt("CreateMultipartUpload") { () async throws(FerryError) -> String in
            try await store.createMultipartUpload(input)
        }
        logger.debug("multipart upload started", metadata: ["uploadId": "\(uploadId)", "parts": "\(plan.count)",
                                                             "partSize": "\(plan.partSize)"])
        let location = input.location
        do {
            let parts = try await forEachConcurrently(plan.parts, concurrency: settings.partConcurrency) { (p) async throws(FerryError) -> CompletedPart in
                try await part(uploadId, p)
            }
            try await control.checkpoint()
            return try await attempt("CompleteMultipartUpload") { () async throws(FerryError) -> ObjectWriteResult in
                try await store.completeMultipartUpload(location, uploadId: uploadId,
                                                        parts: parts.sorted { $0.partNumber < $1.partNumber })
            }
        } catch {
            logger.info("aborting multipart upload", metadata: ["uploadId": "\(uploadId)", "reason": "\(error)"])
            do {
                try await store.abortMultipartUpload(location, uploadId: uploadId)
            } catch let abortError {
                logger.error("cannot abort multipart upload \(uploadId): \(abortError)")
            }
            throw error
        }
    }
}
