import FerryEngine
import FerryS3
import FerryStorage
import FerryStore
import Logging

/// The engine's journal, kept in the worker's SQLite state. A write that fails
/// is logged and skipped: the transfer goes on, and a resume re-checks S3.
struct WorkerJournal: TransferJournal {
    let state: WorkerStateStore
    let logger: Logger

    func openUpload(transferId: String, location: ObjectLocation) async -> (uploadId: String, parts: [CompletedPart])? {
        guard let found = await logged("read the journal", { try await state.openUpload(transferId: transferId, bucket: location.bucket, key: location.key) }),
              let upload = found else {
            return nil
        }
        return (upload.uploadId, upload.parts.map {
            CompletedPart(partNumber: $0.partNumber, eTag: $0.eTag, size: $0.size, checksum: $0.checksum,
                          checksumAlgorithm: $0.checksumAlgorithm.flatMap(ChecksumAlgorithm.init(rawValue:)))
        })
    }

    func uploadStarted(transferId: String, location: ObjectLocation, uploadId: String) async {
        _ = await logged("journal an upload") {
            try await state.uploadStarted(transferId: transferId, bucket: location.bucket, key: location.key, uploadId: uploadId)
        }
    }

    func partUploaded(uploadId: String, part: CompletedPart) async {
        _ = await logged("journal a part") {
            try await state.partUploaded(uploadId: uploadId, part: .init(partNumber: part.partNumber, eTag: part.eTag, size: part.size,
                                                                         checksum: part.checksum,
                                                                         checksumAlgorithm: part.checksumAlgorithm?.rawValue))
        }
    }

    func uploadEnded(uploadId: String) async {
        _ = await logged("journal the end of an upload") { try await state.uploadEnded(uploadId: uploadId) }
    }

    func downloadedParts(transferId: String, eTag: String, partSize: Int64) async -> Set<Int> {
        await logged("read the journal") { try await state.downloadedParts(transferId: transferId, eTag: eTag, partSize: partSize) } ?? []
    }

    func partDownloaded(transferId: String, eTag: String, partSize: Int64, partNumber: Int) async {
        _ = await logged("journal a downloaded part") {
            try await state.partDownloaded(transferId: transferId, eTag: eTag, partSize: partSize, partNumber: partNumber)
        }
    }

    private func logged<T>(_ what: String, _ body: () async throws -> T) async -> T? {
        do {
            return try await body()
        } catch {
            logger.warning("cannot \(what): \(error)")
            return nil
        }
    }
}
