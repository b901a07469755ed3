import FerryCore
import FerryS3

extension TransferRun {
    func delete() async throws(FerryError) -> TransferOutcome {
        // An SSE-C object's old image is readable only with its key (from the request's headers).
        let headers = request.headers ?? [:]
        let previous = try await attempt("HeadObject") { () async throws(FerryError) -> ObjectAttributes? in
            try await store.headObject(bucket: location.bucket, key: location.key, headers: headers)
        }
        let result = try await attempt("DeleteObject") { () async throws(FerryError) -> ObjectWriteResult in
            try await store.deleteObject(bucket: location.bucket, key: location.key)
        }
        var outcome = TransferOutcome(object: .init(bucket: request.bucket, key: job.objectKey, versionId: result.versionId),
                                      eventName: "ObjectRemoved:Delete", requestId: result.requestId, hostId: result.hostId,
                                      bytesTransferred: 0, attempts: 1)
        outcome.previous = previous
        return outcome
    }

    /// A copy inside storage (no bytes pass through the worker): CopyObject up
    /// to `copyThreshold`, multipart copy (UploadPartCopy) above it.
    func copy() async throws(FerryError) -> TransferOutcome {
        guard let sourceURI = request.source else { throw FerryError(.invalidRequest, "copy needs a source s3://bucket/key") }
        let source = try ObjectLocation(s3URI: sourceURI)
        let destination = location
        let head = try await attempt("HeadObject") { () async throws(FerryError) -> ObjectAttributes? in
            try await store.headObject(bucket: source.bucket, key: source.key)
        }
        guard let head else { throw FerryError(.noSuchKey, "copy source \(source) does not exist") }
        setTotal(head.size)
        let previous = try await attempt("HeadObject") { () async throws(FerryError) -> ObjectAttributes? in
            try await store.headObject(bucket: destination.bucket, key: destination.key)
        }
        let result: ObjectWriteResult
        let eventName: String
        if head.size <= settings.copyThreshold {
            result = try await attempt("CopyObject") { () async throws(FerryError) -> ObjectWriteResult in
                try await store.copyObject(from: source, to: destination)
            }
            eventName = "ObjectCreated:Copy"
        } else {
            result = try await multipartCopy(from: source, attributes: head)
            eventName = "ObjectCreated:CompleteMultipartUpload"
        }
        meter.add(head.size - meter.value)
        var outcome = TransferOutcome(object: .init(bucket: request.bucket, key: job.objectKey, size: head.size,
                                                    eTag: result.eTag, versionId: result.versionId),
                                      eventName: eventName, requestId: result.requestId, hostId: result.hostId,
                                      bytesTransferred: head.size, attempts: 1)
        outcome.previous = previous
        outcome.contentType = head.contentType
        outcome.metadata = head.metadata
        return outcome
    }

    private func multipartCopy(from source: ObjectLocation, attributes: ObjectAttributes) async throws(FerryError) -> ObjectWriteResult {
        let plan = try PartPlan(size: attributes.size, requestedPartSize: settings.copyPartSize)
        let input = PutObjectInput(bucket: location.bucket, key: location.key, contentType: attributes.contentType,
                                   metadata: attributes.metadata)
        let run = self
        let destination = location
        return try await multipart(input, plan: plan) { (uploadId, part) async throws(FerryError) -> CompletedPart in
            let copied = try await run.attempt("UploadPartCopy \(part.number)") { () async throws(FerryError) -> CompletedPart in
                try await run.store.uploadPartCopy(destination, uploadId: uploadId, partNumber: part.number,
                                                   source: source, range: part.range)
            }
            run.meter.add(part.length)
            return copied
        }
    }
}
