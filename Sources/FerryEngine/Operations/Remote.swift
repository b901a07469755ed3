import FerryCore
import FerryStorage

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
    /// to `copyThreshold`, multipart copy (UploadPartCopy) above it. The new
    /// object gets the source's content type and user metadata unless the
    /// request gives its own (`contentType`; `metadata` replaces all of the
    /// source's), the request's headers, and this transfer's markers; the
    /// source's Ferry markers are never carried over. An SSE-C source is read
    /// with the request's `x-amz-copy-source-server-side-encryption-customer-*`.
    ///
    /// A multipart copy is of one version of its source: each part is copied
    /// only while the source has the ETag its HEAD gave (where the store
    /// checks `x-amz-copy-source-if-match`), and the source's ETag is read
    /// again before the parts become the object (where it does not). A source
    /// that changed starts the copy over, at most three times.
    func copy() async throws(FerryError) -> TransferOutcome {
        var restarts = 0
        while true {
            do {
                return try await copyOnce()
            } catch where error.code == .preconditionFailed && restarts < 3 {
                restarts += 1
                logger.warning("starting the copy over", metadata: ["reason": "\(error)"])
                meter.add(-meter.value)
            }
        }
    }

    private func copyOnce() async throws(FerryError) -> TransferOutcome {
        let source = try job.copySourceLocation()
        let destination = location
        let headers = request.headers ?? [:]
        let sourceKey = headers.filter { HeaderPolicy.isCopySourceKeyHeader($0.key) }
        let destinationHeaders = headers.filter { !HeaderPolicy.isCopySourceKeyHeader($0.key) }
        // A HEAD of the source carries its SSE-C key under the plain names.
        let sourceHeadHeaders = Dictionary(sourceKey.map { ("x-amz-" + $0.key.lowercased().dropFirst("x-amz-copy-source-".count), $0.value) },
                                           uniquingKeysWith: { a, _ in a })
        let head = try await attempt("HeadObject") { () async throws(FerryError) -> ObjectAttributes? in
            try await store.headObject(bucket: source.bucket, key: source.key, headers: sourceHeadHeaders)
        }
        guard let head else { throw FerryError(.noSuchKey, "copy source \(source) does not exist") }
        setTotal(head.size)
        let previous = try await attempt("HeadObject") { () async throws(FerryError) -> ObjectAttributes? in
            try await store.headObject(bucket: destination.bucket, key: destination.key, headers: destinationHeaders)
        }
        let requested = request.metadata ?? [:]
        let markers = requested.filter { TransferMarker.isMarker($0.key) }
        let userMetadata = requested.filter { !TransferMarker.isMarker($0.key) }
        let metadata = (userMetadata.isEmpty ? head.metadata.filter { !TransferMarker.isMarker($0.key) } : userMetadata)
            .merging(markers) { _, marker in marker }
        let input = PutObjectInput(bucket: destination.bucket, key: destination.key, contentType: request.contentType ?? head.contentType,
                                   metadata: metadata, headers: destinationHeaders)
        if let id = markers[TransferMarker.transferId], let previous, previous.metadata[TransferMarker.transferId] == id,
           previous.size == head.size {
            return alreadyCopied(input, head: previous)
        }
        let result: ObjectWriteResult
        let eventName: String
        if head.size <= settings.copyThreshold {
            let copy = CopyObjectInput(source: source, destination: input, sourceHeaders: sourceKey)
            result = try await attempt("CopyObject", interruptible: false) { () async throws(FerryError) -> ObjectWriteResult in
                try await store.copyObject(copy)
            }
            eventName = "ObjectCreated:Copy"
        } else {
            result = try await multipartCopy(from: source, head: head, input: input, sourceKey: sourceKey,
                                             sourceHeadHeaders: sourceHeadHeaders)
            eventName = "ObjectCreated:CompleteMultipartUpload"
        }
        meter.add(head.size - meter.value)
        var outcome = TransferOutcome(object: .init(bucket: request.bucket, key: job.objectKey, size: head.size,
                                                    eTag: result.eTag, versionId: result.versionId),
                                      eventName: eventName, requestId: result.requestId, hostId: result.hostId,
                                      bytesTransferred: head.size, attempts: 1)
        outcome.previous = previous
        outcome.contentType = input.contentType
        outcome.metadata = input.metadata
        return outcome
    }

    /// A redelivered copy whose object already carries this transfer's id: not copied again.
    private func alreadyCopied(_ input: PutObjectInput, head: ObjectAttributes) -> TransferOutcome {
        logger.info("object already carries this transfer id: not copying again", metadata: ["eTag": "\(head.eTag ?? "-")"])
        var outcome = TransferOutcome(object: .init(bucket: input.bucket, key: input.key, size: head.size, eTag: head.eTag,
                                                    versionId: head.versionId),
                                      eventName: head.size > settings.copyThreshold ? "ObjectCreated:CompleteMultipartUpload" : "ObjectCreated:Copy",
                                      requestId: "", hostId: "", bytesTransferred: 0, attempts: 1)
        outcome.alreadyStored = true
        outcome.storedMetadata = head.metadata
        outcome.previousKnown = false
        outcome.contentType = head.contentType
        outcome.metadata = head.metadata
        return outcome
    }

    private func multipartCopy(from source: ObjectLocation, head: ObjectAttributes, input: PutObjectInput,
                               sourceKey: [String: String], sourceHeadHeaders: [String: String]) async throws(FerryError) -> ObjectWriteResult {
        let plan = try PartPlan(size: head.size, requestedPartSize: settings.copyPartSize)
        let run = self
        let destination = location
        // The destination's SSE-C key (from the request's headers) and the source's.
        let partHeaders = input.headers.filter { HeaderPolicy.isCustomerKeyHeader($0.key) }.merging(sourceKey) { a, _ in a }
            .merging(head.eTag.map { [CopyObjectInput.sourceIfMatchHeader: $0] } ?? [:]) { a, _ in a }
        let unchanged = { @Sendable () async throws(FerryError) -> Void in
            let now = try await run.attempt("HeadObject") { () async throws(FerryError) -> ObjectAttributes? in
                try await run.store.headObject(bucket: source.bucket, key: source.key, headers: sourceHeadHeaders)
            }
            guard let now, now.eTag == head.eTag, now.size == head.size else {
                // ETags are the server's words: bounded in the message.
                func shown(_ eTag: String?) -> String { eTag.map { TextClip.clipped($0, toUTF8: 128) } ?? "none" }
                throw FerryError(.preconditionFailed, "copy source \(source) changed while it was copied (ETag \(shown(head.eTag)) → "
                    + "\(now.map { shown($0.eTag) } ?? "gone")); not completing an object from two versions of it")
            }
        }
        return try await multipart(input, plan: plan, beforeComplete: unchanged) { (uploadId, part) async throws(FerryError) -> CompletedPart in
            let copied = try await run.attempt("UploadPartCopy \(part.number)") { () async throws(FerryError) -> CompletedPart in
                try await run.store.uploadPartCopy(destination, uploadId: uploadId, partNumber: part.number,
                                                   source: source, range: part.range, headers: partHeaders)
            }
            run.meter.add(part.length)
            return copied
        }
    }
}
