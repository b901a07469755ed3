import FerryCore
import FerryS3
import Foundation

extension TransferRun {
    /// Downloads into a hidden temp file beside the destination: a first GET of
    /// one part's range learns the size and ETag; the other ranges follow in
    /// parallel with `If-Match`, written at their offsets. An object replaced
    /// meanwhile fails `If-Match` and the download starts over. The temp file
    /// is fsynced (unless `syncDownloads` is off) and renamed into place, or removed. Ranges written are
    /// journaled: a run that resumes (same ETag, same part size) skips them,
    /// and a hand-off keeps the temp file for it.
    func download() async throws(FerryError) -> TransferOutcome {
        guard let destination = request.destination else { throw FerryError(.invalidRequest, "download needs a destination") }
        let path = try dataRoot.destinationPath(destination)
        // Everything below happens relative to the destination's directory,
        // opened without following links, so swapping a link into the path
        // mid-transfer cannot move the file outside the data root.
        let (directory, name) = try dataRoot.openParentBeneath(path, create: true)
        defer { close(directory) }
        let temp = ".\(name).ferry-\(request.id).part"
        // Not truncated: a resumed run keeps the ranges its journal lists; every
        // other range is rewritten and the file is cut to size at the end.
        let fd = try DataRoot.openRegularFile(at: directory, temp, flags: O_RDWR | O_CREAT, describedAs: "\(path) (temp file \(temp))")
        // The destination itself is replaced by rename only if it is a regular file (or absent).
        var existing = stat()
        if fstatat(directory, name, &existing, AT_SYMLINK_NOFOLLOW) == 0, (existing.st_mode & S_IFMT) != S_IFREG {
            close(fd)
            unlinkat(directory, temp, 0)
            throw FerryError(.invalidPath, "destination \(destination) exists and is \(DataRoot.fileKind(existing.st_mode)); only regular files are replaced")
        }
        var committed = false
        defer {
            close(fd)
            if !committed && !control.isHandedOff { unlinkat(directory, temp, 0) }
        }
        // Start over when the object changed (If-Match failed) or the bytes failed
        // their checksum; the latter counts against the retry limit.
        var restarts = 0, digestFailures = 0
        var attributes: ObjectAttributes
        while true {
            do {
                attributes = try await downloadOnce(into: fd)
                break
            } catch where (error.code == .preconditionFailed && restarts < 3)
                        || (error.code == .badDigest && digestFailures < settings.retryPolicy.retryLimit) {
                if error.code == .badDigest { digestFailures += 1 } else { restarts += 1 }
                logger.warning("starting the download over", metadata: ["reason": "\(error)"])
                meter.add(-meter.value)
                guard ftruncate(fd, 0) == 0 else { throw FerryError(.localIOError, "cannot truncate \(temp)") }
            }
        }
        if settings.syncDownloads {
            let synced = await BlockingPool.shared.run { fsync(fd) == 0 ? nil : String(cString: strerror(errno)) }
            if let reason = synced { throw FerryError(.localIOError, "fsync \(temp): \(reason)") }
        }
        guard renameat(directory, temp, directory, name) == 0 else {
            throw FerryError(.localIOError, "cannot move download into place at \(destination): \(String(cString: strerror(errno)))")
        }
        committed = true
        return TransferOutcome(object: .init(bucket: request.bucket, key: job.objectKey, size: attributes.size,
                                             eTag: attributes.eTag, versionId: attributes.versionId),
                               eventName: nil, requestId: "", hostId: "", bytesTransferred: attributes.size,
                               attempts: restarts + digestFailures + 1)
    }

    private func downloadOnce(into fd: Int32) async throws(FerryError) -> ObjectAttributes {
        let partSize = settings.partSize
        // Of the request's headers only SSE-C keys belong on a GET.
        let sse = (request.headers ?? [:]).filter { HeaderPolicy.isCustomerKeyHeader($0.key) }
        var first: ObjectAttributes
        do {
            first = try await attempt("GetObject") { () async throws(FerryError) -> ObjectAttributes in
                try await store.getObject(GetObjectInput(bucket: location.bucket, key: location.key, range: 0...(partSize - 1),
                                                         headers: sse, checksumMode: true), into: fd, at: 0, progress: meter)
            }
        } catch where error.code == .invalidRange {
            // An empty object has no byte 0: fetch it whole.
            first = try await attempt("GetObject") { () async throws(FerryError) -> ObjectAttributes in
                try await store.getObject(GetObjectInput(bucket: location.bucket, key: location.key, headers: sse,
                                                         checksumMode: true), into: fd, at: 0, progress: meter)
            }
        }
        let size = first.size
        setTotal(size)
        if first.bytesReceived < size {
            guard let eTag = first.eTag else {
                throw FerryError(.storageError, "ranged GET answered without an ETag; cannot guard against a replaced object")
            }
            let id = request.id
            let journal = self.journal
            let written = await journal?.downloadedParts(transferId: id, eTag: eTag, partSize: partSize) ?? []
            await journal?.partDownloaded(transferId: id, eTag: eTag, partSize: partSize, partNumber: 1)
            let rest = Array(PartPlan(rangesOf: size, partSize: partSize).parts.dropFirst())
            let resumed = rest.filter { written.contains($0.number) }
            if !resumed.isEmpty {
                meter.add(resumed.reduce(0) { $0 + $1.length })
                logger.info("resuming download", metadata: ["partsOnDisk": "\(resumed.count + 1)", "parts": "\(rest.count + 1)"])
            }
            let run = self
            let location = self.location
            _ = try await forEachConcurrently(rest.filter { !written.contains($0.number) },
                                              concurrency: settings.partConcurrency) { (part) async throws(FerryError) -> Int64 in
                let got = try await run.attempt("GetObject range \(part.number)") { () async throws(FerryError) -> ObjectAttributes in
                    try await run.store.getObject(GetObjectInput(bucket: location.bucket, key: location.key, range: part.range,
                                                                 ifMatch: eTag, headers: sse),
                                                  into: fd, at: part.offset, progress: run.meter)
                }
                guard got.bytesReceived == part.length else {
                    throw FerryError(.storageError, "range \(part.range) returned \(got.bytesReceived) bytes")
                }
                await journal?.partDownloaded(transferId: id, eTag: eTag, partSize: partSize, partNumber: part.number)
                return got.bytesReceived
            }
        }
        guard ftruncate(fd, off_t(size)) == 0 else { throw FerryError(.localIOError, "cannot size the download file") }
        // Both re-read the whole file: on the blocking pool.
        let checkMD5 = size <= settings.multipartThreshold && request.headers?.isEmpty ?? true
        let attributes = first
        try await BlockingPool.shared.run { () throws(FerryError) in
            try Self.verifyStoredChecksum(fd: fd, size: size, attributes: attributes)
            if checkMD5 { try Self.verifyWholeObjectMD5(fd: fd, size: size, eTag: attributes.eTag) }
        }
        report()
        return first
    }

    /// When the server returned the object's full additional checksum (not a
    /// composite of parts), the bytes must match it.
    private static func verifyStoredChecksum(fd: Int32, size: Int64, attributes: ObjectAttributes) throws(FerryError) {
        guard let (algorithm, expected) = attributes.checksums.first(where: { !$0.value.contains("-") }) else { return }
        var hasher = algorithm.makeHasher()
        try ObjectBody.file(descriptor: fd, offset: 0, length: size).readAll { hasher.update($0) }
        let actual = hasher.finish()
        guard actual == expected else {
            throw FerryError(.badDigest, "downloaded bytes have \(algorithm.rawValue) \(actual), the object's is \(expected)")
        }
    }

    /// A single-part object's ETag is the MD5 of its bytes (unless encrypted
    /// with SSE-C or KMS): checked for objects up to the multipart threshold
    /// sent without SSE headers, where the extra read is cheap. A mismatch is
    /// retried, never accepted.
    private static func verifyWholeObjectMD5(fd: Int32, size: Int64, eTag: String?) throws(FerryError) {
        guard let eTag, case let hex = eTag.trimmingCharacters(in: CharacterSet(charactersIn: "\"")),
              hex.count == 32, hex.allSatisfy(\.isHexDigit) else { return }
        let md5 = Digest.Hasher.md5()
        try ObjectBody.file(descriptor: fd, offset: 0, length: size).readAll { md5.update($0) }
        let actual = md5.finish().hexString
        guard actual == hex.lowercased() else {
            throw FerryError(.badDigest, "downloaded bytes have MD5 \(actual), the object's ETag says \(hex)")
        }
    }
}
