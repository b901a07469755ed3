import FerryCore
import Foundation
import Synchronization

/// An object store in a local directory, behind the same `ObjectStore` seam as
/// S3, for the embedded default (`ferry dev`) and single-machine use.
///
/// Layout under `root/<bucket>/`: `blobs/<random>` holds bytes; `index/<sha256(key)>.json`
/// names the blob and keeps size, ETag (quoted MD5 hex), content type and
/// metadata. A write puts a new blob in place first and then renames a temp
/// index file over the old one, so readers see the old object or the new one,
/// never a mix. Buckets are created on first write.
public final class LocalObjectStore: ObjectStore {
    public let root: URL
    private let indexLock = Mutex(())

    public init(root: URL) throws(FerryError) {
        self.root = root.standardizedFileURL
        do {
            try FileManager.default.createDirectory(at: self.root, withIntermediateDirectories: true)
        } catch {
            throw FerryError(.localIOError, "cannot create object store at \(root.path): \(error.localizedDescription)")
        }
    }

    struct IndexEntry: Codable {
        var key: String
        var blob: String
        var size: Int64
        var eTag: String
        var contentType: String?
        var metadata: [String: String]
        var lastModified: Double
    }

    public func putObject(_ input: PutObjectInput, body: ObjectBody) async throws(FerryError) -> ObjectWriteResult {
        let bucketDir = try bucketDirectory(input.bucket)
        let blobName = UUID().uuidString
        let blobPath = bucketDir.appendingPathComponent("blobs/\(blobName)").path
        let md5 = try writeBlob(body, to: blobPath)
        let entry = IndexEntry(key: input.key, blob: blobName, size: body.length, eTag: "\"\(md5.hexString)\"",
                               contentType: input.contentType, metadata: input.metadata,
                               lastModified: Date().timeIntervalSince1970)
        let replaced = try commitIndex(entry, bucketDir: bucketDir)
        if let replaced { unlink(bucketDir.appendingPathComponent("blobs/\(replaced.blob)").path) }
        return ObjectWriteResult(eTag: entry.eTag, versionId: nil, requestId: Self.requestId(), hostId: Self.hostId())
    }

    public func getObject(bucket: String, key: String, into descriptor: Int32) async throws(FerryError) -> ObjectAttributes {
        let bucketDir = try bucketDirectory(bucket, create: false)
        guard let entry = readIndex(key: key, bucketDir: bucketDir) else {
            throw FerryError(.noSuchKey, "GetObject: no object \(bucket)/\(key)")
        }
        let source = open(bucketDir.appendingPathComponent("blobs/\(entry.blob)").path, O_RDONLY | O_CLOEXEC)
        guard source >= 0 else {
            throw FerryError(.noSuchKey, "GetObject: object \(bucket)/\(key) was removed while it was read")
        }
        defer { close(source) }
        try FileCopy.copy(from: source, to: descriptor, length: entry.size)
        return attributes(entry)
    }

    public func headObject(bucket: String, key: String) async throws(FerryError) -> ObjectAttributes? {
        let bucketDir = try bucketDirectory(bucket, create: false)
        return readIndex(key: key, bucketDir: bucketDir).map(attributes)
    }

    public func copyObject(from source: ObjectLocation, to destination: ObjectLocation) async throws(FerryError) -> ObjectWriteResult {
        let sourceDir = try bucketDirectory(source.bucket, create: false)
        guard let entry = readIndex(key: source.key, bucketDir: sourceDir) else {
            throw FerryError(.noSuchKey, "CopyObject: no object \(source)")
        }
        let blob = open(sourceDir.appendingPathComponent("blobs/\(entry.blob)").path, O_RDONLY | O_CLOEXEC)
        guard blob >= 0 else { throw FerryError(.noSuchKey, "CopyObject: object \(source) was removed while it was copied") }
        defer { close(blob) }
        return try await putObject(PutObjectInput(bucket: destination.bucket, key: destination.key,
                                                  contentType: entry.contentType, metadata: entry.metadata),
                                   body: .file(descriptor: blob, length: entry.size))
    }

    public func deleteObject(bucket: String, key: String) async throws(FerryError) -> ObjectWriteResult {
        let bucketDir = try bucketDirectory(bucket, create: false)
        let indexPath = indexURL(key: key, bucketDir: bucketDir).path
        let removed: IndexEntry? = indexLock.withLock { _ in
            let entry = readIndex(key: key, bucketDir: bucketDir)
            if entry != nil { unlink(indexPath) }
            return entry
        }
        if let removed { unlink(bucketDir.appendingPathComponent("blobs/\(removed.blob)").path) }
        return ObjectWriteResult(eTag: nil, versionId: nil, requestId: Self.requestId(), hostId: Self.hostId())
    }

    // MARK: Layout

    private func bucketDirectory(_ bucket: String, create: Bool = true) throws(FerryError) -> URL {
        guard !bucket.isEmpty, !bucket.contains("/"), bucket != ".", bucket != "..", !bucket.hasPrefix(".") else {
            throw FerryError(.invalidRequest, "invalid bucket name '\(bucket)'")
        }
        let dir = root.appendingPathComponent(bucket, isDirectory: true)
        if create {
            for sub in ["blobs", "index"] {
                do {
                    try FileManager.default.createDirectory(at: dir.appendingPathComponent(sub), withIntermediateDirectories: true)
                } catch {
                    throw FerryError(.localIOError, "cannot create bucket directory \(dir.path): \(error.localizedDescription)")
                }
            }
        }
        return dir
    }

    private func indexURL(key: String, bucketDir: URL) -> URL {
        bucketDir.appendingPathComponent("index/\(Digest.sha256(Array(key.utf8)).hexString).json")
    }

    private func readIndex(key: String, bucketDir: URL) -> IndexEntry? {
        guard let data = FileManager.default.contents(atPath: indexURL(key: key, bucketDir: bucketDir).path),
              let entry = try? JSONDecoder().decode(IndexEntry.self, from: data), entry.key == key else { return nil }
        return entry
    }

    /// Makes `entry` the object's current state; returns the state it replaced.
    private func commitIndex(_ entry: IndexEntry, bucketDir: URL) throws(FerryError) -> IndexEntry? {
        let target = indexURL(key: entry.key, bucketDir: bucketDir)
        let temp = bucketDir.appendingPathComponent("index/.tmp-\(UUID().uuidString)")
        do {
            let data = try JSONEncoder().encode(entry)
            try data.write(to: temp)
        } catch {
            throw FerryError(.localIOError, "cannot write object index: \(error.localizedDescription)")
        }
        return try indexLock.withLock { _ throws(FerryError) -> IndexEntry? in
            let previous = readIndex(key: entry.key, bucketDir: bucketDir)
            guard rename(temp.path, target.path) == 0 else {
                unlink(temp.path)
                throw FerryError(.localIOError, "cannot commit object index: \(String(cString: strerror(errno)))")
            }
            return previous
        }
    }

    /// Writes the body to a new file, fsyncs it, and returns the MD5 of its bytes.
    private func writeBlob(_ body: ObjectBody, to path: String) throws(FerryError) -> [UInt8] {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw FerryError(.localIOError, "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        do throws(FerryError) {
            let md5: [UInt8]
            switch body {
            case .bytes(let bytes):
                try FileCopy.writeAll(bytes, to: fd, at: 0)
                md5 = Digest.md5(bytes)
            case .file(let source, let length):
                md5 = try FileCopy.copy(from: source, to: fd, length: length, hashing: true)!
            }
            guard fsync(fd) == 0 else {
                throw FerryError(.localIOError, "fsync \(path): \(String(cString: strerror(errno)))")
            }
            return md5
        } catch {
            unlink(path)
            throw error
        }
    }

    private func attributes(_ entry: IndexEntry) -> ObjectAttributes {
        ObjectAttributes(size: entry.size, eTag: entry.eTag, contentType: entry.contentType, metadata: entry.metadata,
                         lastModified: Date(timeIntervalSince1970: entry.lastModified), versionId: nil)
    }

    private static func requestId() -> String {
        (0..<8).map { _ in UInt8.random(in: 0...255) }.hexString.uppercased()
    }

    private static func hostId() -> String {
        Data((0..<24).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
    }
}

/// Positioned copies between file descriptors.
enum FileCopy {
    /// Copies `length` bytes from offset 0 of `source` to offset 0 of `target`;
    /// returns their MD5 when `hashing`.
    @discardableResult
    static func copy(from source: Int32, to target: Int32, length: Int64, hashing: Bool = false) throws(FerryError) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var md5 = Digest.Hasher.md5()
        var offset: Int64 = 0
        while offset < length {
            let want = Int(min(Int64(buffer.count), length - offset))
            let n = buffer.withUnsafeMutableBytes { pread(source, $0.baseAddress, want, off_t(offset)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                throw FerryError(.localIOError, n == 0 ? "source ended before \(length) bytes" : "read failed: \(String(cString: strerror(errno)))")
            }
            let chunk = Array(buffer[0..<n])
            if hashing { md5.update(chunk) }
            try writeAll(chunk, to: target, at: offset)
            offset += Int64(n)
        }
        return hashing ? md5.finish() : nil
    }

    static func writeAll(_ bytes: [UInt8], to fd: Int32, at offset: Int64) throws(FerryError) {
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + written, bytes.count - written, off_t(offset + Int64(written))) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw FerryError(.localIOError, "write failed: \(String(cString: strerror(errno)))") }
            written += n
        }
    }
}
