import FerryCore
import FerryS3

extension TransferRun {
    func delete() async throws(FerryError) -> TransferOutcome {
        let result = try await attempt("DeleteObject") { () async throws(FerryError) -> ObjectWriteResult in
            try await store.deleteObject(bucket: location.bucket, key: location.key)
        }
        return TransferOutcome(object: .init(bucket: request.bucket, key: job.objectKey, versionId: result.versionId),
                               eventName: "ObjectRemoved:Delete", requestId: result.requestId, hostId: result.hostId,
                               bytesTransferred: 0, attempts: 1)
    }

    /// CopyObject inside storage: no bytes pass through the worker.
    func copy() async throws(FerryError) -> TransferOutcome {
        guard let sourceURI = request.source else { throw FerryError(.invalidRequest, "copy needs a source s3://bucket/key") }
        let source = try ObjectLocation(s3URI: sourceURI)
        let destination = location
        let result = try await attempt("CopyObject") { () async throws(FerryError) -> ObjectWriteResult in
            try await store.copyObject(from: source, to: destination)
        }
        let size = try await store.headObject(bucket: destination.bucket, key: destination.key)?.size
        return TransferOutcome(object: .init(bucket: request.bucket, key: job.objectKey, size: size,
                                             eTag: result.eTag, versionId: result.versionId),
                               eventName: "ObjectCreated:Copy", requestId: result.requestId, hostId: result.hostId,
                               bytesTransferred: size ?? 0, attempts: 1)
    }
}
