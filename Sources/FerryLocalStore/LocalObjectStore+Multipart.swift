import FerryCore
import FerryStorage
import Foundation
import FerryConcurrency

/// Multipart uploads in the local store: `<bucket>/uploads/<uploadId>/` holds
/// `upload.json` and one file per part with a JSON sidecar; completing
/// concatenates the parts into a blob and commits it like a single PUT. The
/// ETag is S3's: the MD5 of the parts' binary MD5s, then `-<part count>`.
/// An upload, and each part, is durable once the call that stored it returns:
/// the files are fsynced, then the directories that name them.
extension LocalObjectStore {
    /// A stored part's file in its upload's directory: `part-00001`.
    static func partFileName(_ number: Int) -> String { "part-" + Digits.decimal(Int64(number), width: 5) }

    struct UploadRecord: Codable {
        var key: String
        var contentType: String?
        var metadata: [String: String]
        var initiated: Double
    }

    public func createMultipartUpload(_ input: PutObjectInput) async throws(FerryError) -> String {
        try Self.checkWrite(input)
        return try await onDisk { () throws(FerryError) -> String in
            let bucketDir = try self.bucketDirectory(input.bucket)
            let uploadId = UUID().uuidString.lowercased()
            let uploads = bucketDir.appendingPathComponent("uploads")
            let dir = uploads.appendingPathComponent(uploadId)
            let record: [UInt8]
            do {
                record = try FerryJSON.encode(UploadRecord(key: input.key, contentType: input.contentType, metadata: input.metadata,
                                                               initiated: Date().timeIntervalSince1970))
            } catch {
                throw FerryError(.localIOError, "cannot start upload: \(error.localizedDescription)")
            }
            _ = try self.makeDirectory(dir)
            do throws(FerryError) {
                // A record cut short by a crash reads as no upload (`uploadRecord`).
                try self.writeFile(.bytes(Array(record)), to: dir.appendingPathComponent("upload.json").path, progress: nil)
                try self.syncTransientDirectory(dir)
                try self.syncDirectory(uploads)
            } catch {
                try? FileManager.default.removeItem(at: dir)
                throw error
            }
            return uploadId
        }
    }

    public func uploadPart(_ location: ObjectLocation, uploadId: String, partNumber: Int, body: ObjectBody,
                           checksum: ChecksumAlgorithm?, headers extra: [String: String], progress: TransferMeter?) async throws(FerryError) -> CompletedPart {
        return try await onDisk { () throws(FerryError) -> CompletedPart in
            try self.storePart(body, number: partNumber, of: location, uploadId: uploadId, checksum: checksum, progress: progress)
        }
    }

    public func uploadPartCopy(_ location: ObjectLocation, uploadId: String, partNumber: Int, source: ObjectLocation,
                               range: ClosedRange<Int64>, headers: [String: String]) async throws(FerryError) -> CompletedPart {
        return try await onDisk { () throws(FerryError) -> CompletedPart in
            let sourceDir = try self.bucketDirectory(source.bucket, create: false)
            guard let entry = self.readIndex(key: source.key, bucketDir: sourceDir) else {
                throw FerryError(.noSuchKey, "UploadPartCopy: no object \(source)")
            }
            if let wanted = headers.first(where: { $0.key.lowercased() == CopyObjectInput.sourceIfMatchHeader })?.value,
               wanted.trimmingCharacters(in: ["\""]) != entry.eTag.trimmingCharacters(in: ["\""]) {
                throw FerryError(.preconditionFailed, "UploadPartCopy: \(source) is no longer the version with ETag \(wanted)")
            }
            guard range.lowerBound >= 0, range.upperBound < entry.size else {
                throw FerryError(.invalidRange, "UploadPartCopy: range \(range) is outside the object's \(entry.size) bytes")
            }
            let blob = open(sourceDir.appendingPathComponent("blobs/\(entry.blob)").path, O_RDONLY | O_CLOEXEC)
            guard blob >= 0 else { throw FerryError(.noSuchKey, "UploadPartCopy: \(source) was removed while it was copied") }
            defer { close(blob) }
            return try self.storePart(.file(descriptor: blob, offset: range.lowerBound, length: range.upperBound - range.lowerBound + 1),
                                      number: partNumber, of: location, uploadId: uploadId, checksum: nil, progress: nil)
        }
    }

    /// The local store keeps no additional checksums: `wholeChecksum` is not stored.
    public func completeMultipartUpload(_ location: ObjectLocation, uploadId: String, parts: [CompletedPart],
                                        headers: [String: String], wholeChecksum: WholeObjectChecksum?) async throws(FerryError) -> ObjectWriteResult {
        let eTag = try await onDisk { () throws(FerryError) -> String in
            try self.assemble(location, uploadId: uploadId, parts: parts)
        }
        return ObjectWriteResult(eTag: eTag, versionId: nil, requestId: Self.requestId(), hostId: Self.hostId())
    }

    public func abortMultipartUpload(_ location: ObjectLocation, uploadId: String) async throws(FerryError) {
        await pool.run { () -> Void in
            guard let dir = try? self.uploadDirectory(location, uploadId: uploadId) else { return }
            try? FileManager.default.removeItem(at: dir)
        }
    }

    public func listParts(_ location: ObjectLocation, uploadId: String) async throws(FerryError) -> [CompletedPart] {
        try await onDisk { () throws(FerryError) -> [CompletedPart] in
            try self.storedParts(in: self.uploadDirectory(location, uploadId: uploadId))
        }
    }

    public func listMultipartUploads(bucket: String, prefix: String) async throws(FerryError) -> [MultipartUploadSummary] {
        try await onDisk { () throws(FerryError) -> [MultipartUploadSummary] in
            let uploads = try self.bucketDirectory(bucket, create: false).appendingPathComponent("uploads")
            let ids = (try? FileManager.default.contentsOfDirectory(atPath: uploads.path)) ?? []
            return ids.compactMap { id -> MultipartUploadSummary? in
                guard let record = try? self.uploadRecord(uploads.appendingPathComponent(id)), record.key.hasBytePrefix(prefix) else { return nil }
                return MultipartUploadSummary(key: record.key, uploadId: id, initiated: Date(timeIntervalSince1970: record.initiated))
            }.sorted { ($0.key, $0.uploadId) < ($1.key, $1.uploadId) }
        }
    }

    // MARK: On the blocking pool

    /// Writes one part's file and its JSON sidecar into the upload's directory.
    private func storePart(_ body: ObjectBody, number partNumber: Int, of location: ObjectLocation, uploadId: String,
                           checksum: ChecksumAlgorithm?, progress: TransferMeter?) throws(FerryError) -> CompletedPart {
        guard (1...10_000).contains(partNumber) else { throw FerryError(.invalidRequest, "part number \(partNumber) is not in 1…10000") }
        let dir = try uploadDirectory(location, uploadId: uploadId)
        let name = Self.partFileName(partNumber)
        let temp = dir.appendingPathComponent(".\(name)-\(UUID().uuidString)").path
        // The MD5 (the part's ETag) and the additional checksum in the pass that writes the bytes.
        let md5 = Digest.Hasher.md5()
        var hasher = checksum?.makeHasher()
        try writeFile(body, to: temp, progress: progress) { chunk in
            md5.update(chunk)
            hasher?.update(chunk)
        }
        let value = hasher?.finish()
        let part = CompletedPart(partNumber: partNumber, eTag: "\"\(md5.finish().hexString)\"", size: body.length,
                                 checksum: value, checksumAlgorithm: value == nil ? nil : checksum)
        // The sidecar first, then the part: a sidecar without its part is not a stored part (`storedParts`).
        let sidecarTemp = dir.appendingPathComponent(".\(name).json-\(UUID().uuidString)").path
        do throws(FerryError) {
            let sidecar: [UInt8]
            do { sidecar = try FerryJSON.encode(part) } catch {
                throw FerryError(.localIOError, "cannot record part \(partNumber): \(error.localizedDescription)")
            }
            try writeFile(.bytes(Array(sidecar)), to: sidecarTemp, progress: nil)
            guard rename(sidecarTemp, dir.appendingPathComponent("\(name).json").path) == 0 else {
                throw FerryError(.localIOError, "cannot record part \(partNumber): \(String(cString: strerror(errno)))")
            }
        } catch {
            unlink(sidecarTemp)
            unlink(temp)
            throw error
        }
        guard rename(temp, dir.appendingPathComponent(name).path) == 0 else {
            unlink(temp)
            throw FerryError(.localIOError, "cannot store part \(partNumber): \(String(cString: strerror(errno)))")
        }
        try syncTransientDirectory(dir)
        return part
    }

    /// Concatenates the listed parts into a blob, fsyncs it and commits it like a single PUT (`commitObject`). Returns the ETag.
    private func assemble(_ location: ObjectLocation, uploadId: String, parts: [CompletedPart]) throws(FerryError) -> String {
        let dir = try uploadDirectory(location, uploadId: uploadId)
        let stored = Dictionary(storedParts(in: dir).map { ($0.partNumber, $0) }) { a, _ in a }
        let ordered = parts.sorted { $0.partNumber < $1.partNumber }
        guard !ordered.isEmpty else { throw FerryError(.invalidRequest, "CompleteMultipartUpload needs at least one part") }
        for part in ordered {
            guard let have = stored[part.partNumber], have.eTag == part.eTag else {
                throw FerryError(.invalidRequest, "InvalidPart: part \(part.partNumber) is not stored with ETag \(part.eTag)")
            }
        }
        // The stored parts' ETags are their MD5s (`storePart`).
        guard let eTag = MultipartETag.of(ordered) else {
            throw FerryError(.invalidRequest, "InvalidPart: a part's ETag is not an MD5")
        }
        let record = try uploadRecord(dir)
        let bucketDir = try bucketDirectory(location.bucket)
        let newBlob = try NewBlob(in: bucketDir)
        // Closing releases the blob's lock: only once its entry is committed (or it is removed).
        defer { close(newBlob.descriptor) }
        let blob = newBlob.descriptor, blobPath = newBlob.path
        let size: Int64
        do throws(FerryError) {
            var written: Int64 = 0
            for part in ordered {
                let path = dir.appendingPathComponent(Self.partFileName(part.partNumber)).path
                let fd = open(path, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { throw FerryError(.localIOError, "part \(part.partNumber) vanished") }
                defer { close(fd) }
                let length = stored[part.partNumber]!.size
                try FileCopy.copy(from: fd, at: 0, to: blob, at: written, length: length)
                written += length
            }
            guard fsync(blob) == 0 else { throw FerryError(.localIOError, "fsync \(blobPath) failed") }
            size = written
        } catch {
            unlink(blobPath)
            throw error
        }
        let entry = IndexEntry(key: location.key, blob: newBlob.name, size: size, eTag: eTag, contentType: record.contentType,
                               metadata: record.metadata, lastModified: Date().timeIntervalSince1970)
        try commitObject(entry, bucketDir: bucketDir, ifAbsent: false)
        try? FileManager.default.removeItem(at: dir)
        return eTag
    }

    /// The parts stored in an upload's directory, by number.
    private func storedParts(in dir: URL) -> [CompletedPart] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.filter { $0.hasPrefix("part-") && $0.hasSuffix(".json") }.compactMap { name -> CompletedPart? in
            // A sidecar without its part file is an upload interrupted mid-part: not stored.
            let partFile = dir.appendingPathComponent(String(name.dropLast(5))).path
            guard FileManager.default.fileExists(atPath: partFile),
                  let data = FileManager.default.contents(atPath: dir.appendingPathComponent(name).path) else { return nil }
            return try? JSONDecoder().decode(CompletedPart.self, from: data)
        }.sorted { $0.partNumber < $1.partNumber }
    }

    private func uploadDirectory(_ location: ObjectLocation, uploadId: String) throws(FerryError) -> URL {
        guard !uploadId.isEmpty, !uploadId.contains("/"), !uploadId.hasPrefix(".") else {
            throw FerryError(.noSuchUpload, "no upload \(uploadId)")
        }
        let dir = try bucketDirectory(location.bucket, create: false).appendingPathComponent("uploads/\(uploadId)")
        guard let record = try? uploadRecord(dir), record.key == location.key else {
            throw FerryError(.noSuchUpload, "no upload \(uploadId) for \(location)")
        }
        return dir
    }

    func uploadRecord(_ dir: URL) throws(FerryError) -> UploadRecord {
        BlockingPool.assertOnPoolThread("reading a local upload's record")
        guard let data = FileManager.default.contents(atPath: dir.appendingPathComponent("upload.json").path),
              let record = try? JSONDecoder().decode(UploadRecord.self, from: data) else {
            throw FerryError(.noSuchUpload, "no upload at \(dir.lastPathComponent)")
        }
        return record
    }
}
