import FerryCore
import FerryStorage
import Foundation
import FerryConcurrency

extension TransferRun {
    /// Uploads a `file://` or `data:` source: one PUT up to the multipart
    /// threshold, else a multipart upload with parts read by position from the file.
    func upload() async throws(FerryError) -> TransferOutcome {
        guard let source = request.source else { throw FerryError(.invalidRequest, "upload needs a source") }
        let input = PutObjectInput(bucket: request.bucket, key: job.objectKey,
                                   contentType: request.contentType, metadata: request.metadata ?? [:],
                                   headers: request.headers ?? [:], checksum: settings.checksum)
        if ChunkedSource.isChunked(source) {
            return try await uploadChunked(try ChunkedSource(parsing: source), input: input)
        }
        if source.lowercased().hasPrefix("data:") {
            let bytes = try DataURI.decode(source, limit: settings.maxDataURIBytes)
            var typed = input
            typed.contentType = typed.contentType ?? DataURI.mediaType(source) ?? ContentType.fallback
            return try await uploadBody(typed, body: .bytes(bytes))
        }
        let lowered = source.lowercased()
        if lowered.hasPrefix("https://") || lowered.hasPrefix("http://") {
            return try await uploadRemote(source, input: input)
        }
        let path = try dataRoot.sourcePath(source, areas: job.localAreas)
        // Opened component by component without following links: a link swapped
        // in after the check is refused, not followed.
        // Never blocks (a FIFO is refused, not waited on) and yields regular files only.
        let fd = try dataRoot.openBeneath(path, flags: O_RDONLY, areas: job.localAreas)
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw FerryError(.localIOError, "cannot stat source \(source): \(String(cString: strerror(errno)))")
        }
        var typed = input
        typed.contentType = typed.contentType ?? ContentType.forFileName(path)
        let stamp = SourceStamp(info)
        return try await uploadBody(typed, body: .file(descriptor: fd, offset: 0, length: Int64(info.st_size))) { () throws(FerryError) in
            try stamp.checkUnchanged(fd, source: source)
        }
    }

    /// Fetches a remote source into a temp file under the data root (its bytes
    /// do not count as upload progress), then uploads that file.
    private func uploadRemote(_ source: String, input: PutObjectInput) async throws(FerryError) -> TransferOutcome {
        guard let fetcher = remoteSources else {
            throw RemoteSourceRefusal.disabled(source)
        }
        let directory = URL(fileURLWithPath: dataRoot.path).appendingPathComponent(".ferry-fetch")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let temp = directory.appendingPathComponent("\(request.id)-\(UUID().uuidString)").path
        let fd = open(temp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw FerryError(.localIOError, "cannot create \(temp): \(String(cString: strerror(errno)))") }
        defer { close(fd); unlink(temp) }
        let fetched = try await attempt("fetch source") { () async throws(FerryError) -> Int64 in
            let before = meter.value
            defer { meter.add(before - meter.value) }
            return try await fetcher.fetch(source, into: fd, progress: meter)
        }
        var typed = input
        if typed.contentType == nil, let path = URLComponents(string: source)?.path {
            typed.contentType = ContentType.forFileName(path)
        }
        return try await uploadBody(typed, body: .file(descriptor: fd, offset: 0, length: fetched))
    }

    /// Reads a claim-checked upload from Kafka into a temp file under the data
    /// root (its bytes do not count as upload progress), then uploads that file.
    private func uploadChunked(_ source: ChunkedSource, input: PutObjectInput) async throws(FerryError) -> TransferOutcome {
        guard let chunks else { throw FerryError(.forbiddenSource, "kafka-chunks sources need a worker that reads Kafka") }
        let directory = URL(fileURLWithPath: dataRoot.path).appendingPathComponent(".ferry-fetch")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let temp = directory.appendingPathComponent("\(request.id)-\(UUID().uuidString)").path
        let fd = open(temp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw FerryError(.localIOError, "cannot create \(temp): \(String(cString: strerror(errno)))") }
        defer { close(fd); unlink(temp) }
        let id = request.id
        let fetched = try await attempt("read chunks") { () async throws(FerryError) -> Int64 in
            let before = meter.value
            defer { meter.add(before - meter.value) }
            return try await chunks.fetch(source, transferId: id, into: fd, progress: meter)
        }
        var typed = input
        typed.contentType = typed.contentType ?? ContentType.fallback
        return try await uploadBody(typed, body: .file(descriptor: fd, offset: 0, length: fetched))
    }

    /// `unchanged` is checked after the last part is sent and before the parts
    /// become the object (a single PUT needs no such check: its Content-MD5,
    /// computed from the bytes just before they are sent, fails a change between).
    private func uploadBody(_ input: PutObjectInput, body: ObjectBody,
                            unchanged: (@Sendable () async throws(FerryError) -> Void)? = nil) async throws(FerryError) -> TransferOutcome {
        let size = body.length
        setTotal(size)
        // Worker requests (they carry the transfer-id marker) need to know what the key
        // held; `ferry cp` does not. One PUT up to the threshold, with `If-None-Match: *`
        // where the store checks it: a new key (the common case) then needs no HEAD.
        let marked = input.metadata[TransferMarker.transferId] != nil
        let single = size <= settings.multipartThreshold
        if marked, single, store.conditionalWrites.enforced {
            var conditional = input
            conditional.ifNoneMatch = true
            do {
                return putOutcome(input, size: size, result: try await put(conditional, body: body), previous: nil)
            } catch where error.code == .preconditionFailed {
                // The key holds an object: find out which, as below (a redelivery, or an overwrite).
                meter.add(-meter.value)
            }
        }
        let previous = marked ? try await objectBefore(input) : nil
        if let head = previous, let done = alreadyStored(input, size: size, head: head) { return done }
        guard single else {
            guard case .file(let fd, _, _) = body else {
                throw FerryError(.invalidRequest, "in-memory sources are limited to \(settings.multipartThreshold) bytes")
            }
            let result = try await multipartUpload(input, descriptor: fd, size: size, unchanged: unchanged)
            return putOutcome(input, size: size, result: result, previous: previous, eventName: "ObjectCreated:CompleteMultipartUpload")
        }
        return putOutcome(input, size: size, result: try await overwrite(input, body: body, existing: previous), previous: previous)
    }

    private func put(_ input: PutObjectInput, body: ObjectBody) async throws(FerryError) -> ObjectWriteResult {
        do {
            return try await attempt("PutObject") { () async throws(FerryError) -> ObjectWriteResult in
                try await store.putObject(input, body: body, progress: meter)
            }
        } catch where error.code == .cancelled {
            // A cancel after the last byte and before the store's answer aborts a PUT
            // the store may have completed: then the object stands (reported, with its
            // event), rather than a `cancelled` transfer whose object was stored.
            guard let stored = await storedDespiteCancel(input, size: body.length) else { throw error }
            logger.notice("cancelled after the store had taken the object: it stands, and is reported completed",
                          metadata: ["eTag": "\(stored.eTag ?? "-")"])
            return stored
        }
    }

    /// The object the aborted PUT stored, when the key holds this transfer's
    /// bytes (its transfer-id marker and size). Asked once, whatever the cancel.
    private func storedDespiteCancel(_ input: PutObjectInput, size: Int64) async -> ObjectWriteResult? {
        guard input.metadata[TransferMarker.transferId] != nil else { return nil }
        let store = self.store
        let head = await withoutCancellation { () -> ObjectAttributes? in
            try? await store.headObject(bucket: input.bucket, key: input.key, headers: input.headers)
        }
        guard let head, Self.holdsThisTransfer(head, input: input, size: size) else { return nil }
        return ObjectWriteResult(eTag: head.eTag, versionId: head.versionId, requestId: "", hostId: "")
    }

    /// The PUT after a HEAD. Where the store's check of `If-None-Match` is not
    /// known yet, the first overwrite carries it: a 412 shows the store checks
    /// it (and the PUT goes again without), a success that it does not.
    private func overwrite(_ input: PutObjectInput, body: ObjectBody, existing: ObjectAttributes?) async throws(FerryError) -> ObjectWriteResult {
        let conditional = store.conditionalWrites
        guard existing != nil, conditional.shouldProbe else { return try await put(input, body: body) }
        var probe = input
        probe.ifNoneMatch = true
        do {
            let result = try await put(probe, body: body)
            if conditional.learned(enforced: false) {
                logger.notice("the store wrote over an object despite If-None-Match: *; uploads keep asking with a HEAD first")
            }
            return result
        } catch where error.code == .preconditionFailed {
            if conditional.learned(enforced: true) {
                logger.notice("the store checks If-None-Match: uploads of new keys go without a HEAD from now on")
            }
            meter.add(-meter.value)
            return try await put(input, body: body)
        }
    }

    private func putOutcome(_ input: PutObjectInput, size: Int64, result: ObjectWriteResult, previous: ObjectAttributes?,
                            eventName: String = "ObjectCreated:Put") -> TransferOutcome {
        report()
        var outcome = TransferOutcome(object: .init(bucket: input.bucket, key: input.key, size: size, eTag: result.eTag,
                                                    versionId: result.versionId),
                                      eventName: eventName, requestId: result.requestId, hostId: result.hostId,
                                      bytesTransferred: size, attempts: 1)
        outcome.previous = previous
        outcome.contentType = input.contentType
        outcome.metadata = input.metadata
        return outcome
    }

    /// What the key holds before the write: the old image of the stream record,
    /// and for a redelivered request the proof that the upload already happened.
    private func objectBefore(_ input: PutObjectInput) async throws(FerryError) -> ObjectAttributes? {
        try await attempt("HeadObject") { () async throws(FerryError) -> ObjectAttributes? in
            try await store.headObject(bucket: input.bucket, key: input.key, headers: input.headers)
        }
    }

    /// A request carrying a transfer-id marker (every worker request) may be a
    /// redelivery: when the object already has this id and size, the upload
    /// happened and is not repeated.
    private func alreadyStored(_ input: PutObjectInput, size: Int64, head: ObjectAttributes) -> TransferOutcome? {
        guard Self.holdsThisTransfer(head, input: input, size: size) else { return nil }
        logger.info("object already carries this transfer id: not uploading again", metadata: ["eTag": "\(head.eTag ?? "-")"])
        let multipart = head.eTag?.contains("-") ?? (size > settings.multipartThreshold)
        var outcome = TransferOutcome(object: .init(bucket: input.bucket, key: input.key, size: size, eTag: head.eTag,
                                                    versionId: head.versionId),
                                      eventName: multipart ? "ObjectCreated:CompleteMultipartUpload" : "ObjectCreated:Put",
                                      requestId: "", hostId: "", bytesTransferred: 0, attempts: 1)
        outcome.alreadyStored = true
        outcome.storedMetadata = head.metadata
        outcome.previousKnown = false
        outcome.contentType = head.contentType
        outcome.metadata = head.metadata
        return outcome
    }

    /// Whether the object is this transfer's: its transfer-id marker and size.
    private static func holdsThisTransfer(_ head: ObjectAttributes, input: PutObjectInput, size: Int64) -> Bool {
        guard let marker = input.metadata[TransferMarker.transferId] else { return false }
        return head.metadata[TransferMarker.transferId] == marker && head.size == size
    }

    /// Parts are read from the file by position and streamed. A part S3
    /// already holds (an interrupted run's) is kept when its MD5 ETag or its
    /// checksum matches the file's bytes.
    private func multipartUpload(_ input: PutObjectInput, descriptor fd: Int32, size: Int64,
                                 unchanged: (@Sendable () async throws(FerryError) -> Void)?) async throws(FerryError) -> ObjectWriteResult {
        let plan = try PartPlan(size: size, requestedPartSize: settings.partSize)
        let run = self
        let location = input.location
        let headers = input.headers
        let checksum = input.checksum
        let verify: PartVerifier = { (planned, stored) throws(FerryError) -> Bool in
            try Self.sameBytes(stored, as: .file(descriptor: fd, offset: planned.offset, length: planned.length))
        }
        return try await multipart(input, plan: plan, verify: verify, beforeComplete: unchanged) { (uploadId, part) async throws(FerryError) -> CompletedPart in
            try await run.attempt("UploadPart \(part.number)") { () async throws(FerryError) -> CompletedPart in
                try await run.store.uploadPart(location, uploadId: uploadId, partNumber: part.number,
                                               body: .file(descriptor: fd, offset: part.offset, length: part.length),
                                               checksum: checksum, headers: headers, progress: run.meter)
            }
        }
    }
}

extension TransferRun {
    /// Whether a stored part holds `body`: by its ETag when that is an MD5
    /// (always, but with SSE-KMS or SSE-C), else by its checksum when it has one.
    static func sameBytes(_ stored: CompletedPart, as body: ObjectBody) throws(FerryError) -> Bool {
        let hex = stored.eTag.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        if hex.count == 32, hex.allSatisfy(\.isHexDigit) {
            let md5 = Digest.Hasher.md5()
            try body.readAll { md5.update($0) }
            return md5.finish().hexString == hex.lowercased()
        }
        guard let algorithm = stored.checksumAlgorithm, let expected = stored.checksum else { return false }
        var hasher = algorithm.makeHasher()
        try body.readAll { hasher.update($0) }
        return hasher.finish() == expected
    }
}

/// What a write into a file moves: its size and modification time (not its
/// change time, which a chmod, or a rename or unlink of the file, moves too).
/// An upload reads its parts from one open descriptor, so a file replaced by
/// a rename is not a change (the old bytes are read on); a write into it is.
struct SourceStamp: Sendable, Equatable {
    let size: Int64
    let modified: timespec

    init(_ info: stat) {
        size = Int64(info.st_size); modified = info.st_mtim
    }

    static func == (a: SourceStamp, b: SourceStamp) -> Bool {
        a.size == b.size && a.modified.tv_sec == b.modified.tv_sec && a.modified.tv_nsec == b.modified.tv_nsec
    }

    func checkUnchanged(_ fd: Int32, source: String) throws(FerryError) {
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw FerryError(.localIOError, "cannot stat source \(source): \(String(cString: strerror(errno)))")
        }
        let now = SourceStamp(info)
        guard now != self else { return }
        let what = now.size == size ? "its bytes" : "its size (\(size) → \(now.size) bytes)"
        throw FerryError(.sourceChanged, "\(source) was written while it was uploaded (\(what) changed); "
            + "not completing an object from two versions of it")
    }
}
