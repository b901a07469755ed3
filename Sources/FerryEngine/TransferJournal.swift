import FerryStorage
import Synchronization

/// Where the engine records how far a transfer got, so that after a crash or
/// a hand-off it resumes instead of starting over. The worker backs it with
/// SQLite; without one (`ferry cp`), a transfer still resumes uploads that S3
/// reports (ListMultipartUploads + ListParts). Methods do not throw: a lost
/// record only costs a re-check against storage.
public protocol TransferJournal: Sendable {
    /// The open multipart upload this transfer started before, with the parts recorded for it.
    func openUpload(transferId: String, location: ObjectLocation) async -> (uploadId: String, parts: [CompletedPart])?
    func uploadStarted(transferId: String, location: ObjectLocation, uploadId: String) async
    func partUploaded(uploadId: String, part: CompletedPart) async
    /// The upload was completed or aborted.
    func uploadEnded(uploadId: String) async
    /// Part numbers of a download already in its temp file, valid for this ETag and part size.
    func downloadedParts(transferId: String, eTag: String, partSize: Int64) async -> Set<Int>
    func partDownloaded(transferId: String, eTag: String, partSize: Int64, partNumber: Int) async
}

/// Upload ids that transfers of this process are using, so one transfer never
/// adopts another's upload and the sweeper leaves them alone.
public final class UploadsInUse: Sendable {
    private let ids = Mutex<Set<String>>([])
    public init() {}

    /// Returns false when the id is already taken.
    func claim(_ id: String) -> Bool { ids.withLock { $0.insert(id).inserted } }
    func release(_ id: String) { _ = ids.withLock { $0.remove(id) } }
    public func contains(_ id: String) -> Bool { ids.withLock { $0.contains(id) } }
}
