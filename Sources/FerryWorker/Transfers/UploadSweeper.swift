import FerryCore
import FerryEngine
import FerryS3
import FerryStorage
import FerryStore
import Foundation
import Logging

/// Aborts this worker's own incomplete multipart uploads that nobody will
/// finish: at once when their transfer is finished (in this worker's finished
/// set, or the object already carries the transfer's id because another worker
/// completed it after a crash), otherwise once older than `age`, as S3's
/// AbortIncompleteMultipartUpload lifecycle rule would. It only ever touches
/// upload ids in this worker's journal (started or adopted here), never anyone
/// else's, and skips those a transfer is using.
struct UploadSweeper: Sendable {
    let state: WorkerStateStore
    let store: any ObjectStore
    let inUse: UploadsInUse
    let age: Double
    let logger: Logger

    /// One pass; returns how many uploads it aborted.
    @discardableResult
    func sweep(now: Date = Date()) async -> Int {
        let open: [JournaledUpload]
        do {
            open = try await state.openUploads(createdBefore: now)
        } catch {
            logger.warning("sweeper: cannot read the journal: \(error)")
            return 0
        }
        var aborted = 0
        for upload in open where !inUse.contains(upload.uploadId) {
            let reason: String
            if upload.createdAt < now.addingTimeInterval(-age) {
                reason = "older than \(age.clampedInt()) s"
            } else if await transferIsFinished(upload) {
                reason = "its transfer is finished"
            } else {
                continue
            }
            let location = ObjectLocation(bucket: upload.bucket, key: upload.key)
            do {
                try await store.abortMultipartUpload(location, uploadId: upload.uploadId)
                aborted += 1
                logger.info("sweeper: aborted an incomplete multipart upload (\(reason))", metadata: [
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

    /// Finished here, or completed by another worker (the object carries the transfer id).
    private func transferIsFinished(_ upload: JournaledUpload) async -> Bool {
        if (try? await state.finishedStatus(id: upload.transferId)) != nil { return true }
        guard let head = try? await store.headObject(bucket: upload.bucket, key: upload.key) else { return false }
        return head.metadata[TransferMarker.transferId] == upload.transferId
    }
}
