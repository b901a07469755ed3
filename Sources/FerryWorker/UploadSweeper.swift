import FerryEngine
import FerryS3
import FerryStore
import Foundation
import Logging

/// Aborts this worker's own incomplete multipart uploads once they are older
/// than `age`, as S3's AbortIncompleteMultipartUpload lifecycle rule would.
/// It only ever touches upload ids in this worker's journal (started or
/// adopted here), never anyone else's, and skips those a transfer is using.
struct UploadSweeper: Sendable {
    let state: WorkerStateStore
    let store: any ObjectStore
    let inUse: UploadsInUse
    let age: Double
    let logger: Logger

    /// One pass; returns how many uploads it aborted.
    @discardableResult
    func sweep(now: Date = Date()) async -> Int {
        let stale: [JournaledUpload]
        do {
            stale = try await state.openUploads(createdBefore: now.addingTimeInterval(-age))
        } catch {
            logger.warning("sweeper: cannot read the journal: \(error)")
            return 0
        }
        var aborted = 0
        for upload in stale where !inUse.contains(upload.uploadId) {
            let location = ObjectLocation(bucket: upload.bucket, key: upload.key)
            do {
                try await store.abortMultipartUpload(location, uploadId: upload.uploadId)
                aborted += 1
                logger.info("sweeper: aborted an incomplete multipart upload", metadata: [
                    "uploadId": "\(upload.uploadId)", "object": "\(location)", "transfer": "\(upload.transferId)",
                    "createdAt": "\(upload.createdAt)"])
            } catch where error.code == .noSuchUpload {
                // Completed or aborted meanwhile (perhaps by a worker that adopted it).
            } catch {
                logger.warning("sweeper: cannot abort upload \(upload.uploadId) of \(location): \(error)")
                continue
            }
            do { try await state.uploadEnded(uploadId: upload.uploadId) } catch {
                logger.warning("sweeper: cannot journal the end of upload \(upload.uploadId): \(error)")
            }
        }
        return aborted
    }
}
