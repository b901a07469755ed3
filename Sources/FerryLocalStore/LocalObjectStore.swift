import FerryCore
import FerryStorage
import Foundation
import Synchronization
import FerryConcurrency

/// An object store in a local directory, behind the same `ObjectStore` seam as
/// S3, for the embedded default (`ferry dev`) and single-machine use.
///
/// Layout under `root/<bucket>/`: `blobs/<random>` holds bytes; `index/<sha256(key)>.json`
/// names the blob and keeps size, ETag (quoted MD5 hex), content type and
/// metadata. A write puts a new blob in place first and then renames a temp
/// index file over the old one, so readers see the old object or the new one,
/// never a mix. A write returns once it would survive a power loss: both
/// files are fsynced, and so are the directories that name them (one fsync
/// for all writes waiting at the time, `DirectorySync`). Buckets are created
/// on first write, and a multipart upload's directory, record and parts are
/// made durable the same way before the call that stored them returns. What a
/// crash leaves between the two steps is removed by `reclaimAbandonedWrites`.
public final class LocalObjectStore: ObjectStore {
    public let root: URL
    private let indexLock = Mutex(())
    /// One `DirectorySync` per directory whose entries a write must make durable.
    private let directorySyncs = Mutex<[String: DirectorySync]>([:])
    /// A write with `ifNoneMatch` is checked under the index lock.
    public let conditionalWrites = ConditionalWrites(.on)
    /// Where every file-system call of the store runs (`onDisk`).
    let pool: BlockingPool
    /// Makes a directory's entries durable (replaced only by tests, to see which ones are).
    let fsyncDirectory: @Sendable (String) -> FerryError?

    public convenience init(root: URL, pool: BlockingPool = .shared) throws(FerryError) {
        try self.init(root: root, pool: pool, fsyncDirectory: DirectorySync.fsyncDirectory)
    }

    init(root: URL, pool: BlockingPool, fsyncDirectory: @escaping @Sendable (String) -> FerryError?) throws(FerryError) {
        self.root = root.standardizedFileURL
        self.pool = pool
        self.fsyncDirectory = fsyncDirectory
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

    public func putObject(_ input: PutObjectInput, body: ObjectBody, progress: TransferMeter?) async throws(FerryError) -> ObjectWriteResult {
        try Self.checkWrite(input)
        let eTag = try await onDisk { () throws(FerryError) -> String in
            try self.store(body, as: input, progress: progress)
        }
        return ObjectWriteResult(eTag: eTag, versionId: nil, requestId: Self.requestId(), hostId: Self.hostId())
    }

    public func getObject(_ input: GetObjectInput, into descriptor: Int32, at offset: Int64,
                          progress: TransferMeter?) async throws(FerryError) -> ObjectAttributes {
        try ObjectLocation.checkAddress(bucket: input.bucket, key: input.key)
        let opened = try await onDisk { () throws(FerryError) -> (IndexEntry, Int32) in
            let bucketDir = try self.bucketDirectory(input.bucket, create: false)
            guard let entry = self.readIndex(key: input.key, bucketDir: bucketDir) else {
                throw FerryError(.noSuchKey, "GetObject: no object \(input.bucket)/\(input.key)")
            }
            if let ifMatch = input.ifMatch, ifMatch != entry.eTag {
                throw FerryError(.preconditionFailed, "GetObject: \(input.bucket)/\(input.key) changed (ETag \(entry.eTag), expected \(ifMatch))")
            }
            if let range = input.range, range.lowerBound >= entry.size {
                throw FerryError(.invalidRange, "GetObject: range \(range) is beyond the object's \(entry.size) bytes")
            }
            let source = open(bucketDir.appendingPathComponent("blobs/\(entry.blob)").path, O_RDONLY | O_CLOEXEC)
            guard source >= 0 else {
                throw FerryError(.noSuchKey, "GetObject: object \(input.bucket)/\(input.key) was removed while it was read")
            }
            return (entry, source)
        }
        let (entry, source) = opened
        defer { close(source) }
        var start: Int64 = 0, length = entry.size
        if let range = input.range {
            start = range.lowerBound
            length = min(range.upperBound, entry.size - 1) - start + 1
        }
        var attributes = attributes(entry)
        input.observer?.attributes(attributes)
        try await onDisk { [start, length] () throws(FerryError) in
            try FileCopy.copy(from: source, at: start, to: descriptor, at: offset, length: length, progress: progress)
        }
        attributes.bytesReceived = length
        return attributes
    }

    public func headObject(bucket: String, key: String, headers: [String: String]) async throws(FerryError) -> ObjectAttributes? {
        try ObjectLocation.checkAddress(bucket: bucket, key: key)
        return try await onDisk { () throws(FerryError) -> ObjectAttributes? in
            self.readIndex(key: key, bucketDir: try self.bucketDirectory(bucket, create: false)).map(self.attributes)
        }
    }

    public func copyObject(_ input: CopyObjectInput) async throws(FerryError) -> ObjectWriteResult {
        let source = input.source
        try ObjectLocation.checkAddress(bucket: source.bucket, key: source.key)
        try Self.checkWrite(input.destination)
        let eTag = try await onDisk { () throws(FerryError) -> String in
            let sourceDir = try self.bucketDirectory(source.bucket, create: false)
            guard let entry = self.readIndex(key: source.key, bucketDir: sourceDir) else {
                throw FerryError(.noSuchKey, "CopyObject: no object \(source)")
            }
            let blob = open(sourceDir.appendingPathComponent("blobs/\(entry.blob)").path, O_RDONLY | O_CLOEXEC)
            guard blob >= 0 else { throw FerryError(.noSuchKey, "CopyObject: object \(source) was removed while it was copied") }
            defer { close(blob) }
            return try self.store(.file(descriptor: blob, offset: 0, length: entry.size), as: input.destination, progress: nil)
        }
        return ObjectWriteResult(eTag: eTag, versionId: nil, requestId: Self.requestId(), hostId: Self.hostId())
    }

    public func deleteObject(bucket: String, key: String) async throws(FerryError) -> ObjectWriteResult {
        try ObjectLocation.checkAddress(bucket: bucket, key: key)
        try await onDisk { () throws(FerryError) in
            let bucketDir = try self.bucketDirectory(bucket, create: false)
            let indexPath = self.indexURL(key: key, bucketDir: bucketDir).path
            let removed: IndexEntry? = self.indexLock.withLock { _ in
                let entry = self.readIndex(key: key, bucketDir: bucketDir)
                if entry != nil { unlink(indexPath) }
                return entry
            }
            guard let removed else { return }
            unlink(bucketDir.appendingPathComponent("blobs/\(removed.blob)").path)
            try self.syncDirectory(bucketDir.appendingPathComponent("index"))
        }
        return ObjectWriteResult(eTag: nil, versionId: nil, requestId: Self.requestId(), hostId: Self.hostId())
    }

    /// The local store keeps no key order: a listing reads the bucket's index
    /// and sorts it (memory grows with the bucket; for the embedded default).
    public func listObjects(bucket: String, prefix: String, continuation: String?, maxKeys: Int) async throws(FerryError) -> ObjectListing {
        try ObjectLocation.checkAddress(bucket: bucket, key: nil)
        var entries = try await onDisk { () throws(FerryError) -> [IndexEntry] in
            let directory = try self.bucketDirectory(bucket, create: false).appendingPathComponent("index")
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            var entries: [IndexEntry] = []
            for name in names where name.hasSuffix(".json") && !name.hasPrefix(".") {
                guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path),
                      let entry = try? JSONDecoder().decode(IndexEntry.self, from: data), entry.key.hasBytePrefix(prefix) else { continue }
                if let continuation, !Array(continuation.utf8).lexicographicallyPrecedes(Array(entry.key.utf8)) { continue }
                entries.append(entry)
            }
            return entries
        }
        entries.sort { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }
        let page = entries.prefix(max(1, maxKeys))
        let items = page.map { ObjectListing.Item(key: $0.key, size: $0.size, eTag: $0.eTag.trimmingCharacters(in: CharacterSet(charactersIn: "\"")),
                                                  lastModified: Date(timeIntervalSince1970: $0.lastModified)) }
        return ObjectListing(items: items, next: entries.count > page.count ? page.last?.key : nil)
    }

    /// What every write checks before it touches the disk: the address, and
    /// the headers S3 would receive (the local store refuses what S3 would).
    static func checkWrite(_ input: PutObjectInput) throws(FerryError) {
        try ObjectLocation.checkAddress(bucket: input.bucket, key: input.key)
        _ = try input.headerFields()
    }

    // MARK: Layout (every function below blocks: called on the blocking pool only)

    /// Runs the store's file-system work (reads, writes, fsyncs, renames) on
    /// the blocking pool, never on the caller's thread: a store's caller is
    /// async code on the cooperative pool (one thread per core), which a
    /// waiting fsync would stall for everything else in the process.
    func onDisk<T: Sendable>(_ body: @escaping @Sendable () throws(FerryError) -> T) async throws(FerryError) -> T {
        try await pool.run(body)
    }

    /// Writes `body` as the object `input` names: a new blob, then its index
    /// entry; removes the blob it replaced. Returns the ETag.
    func store(_ body: ObjectBody, as input: PutObjectInput, progress: TransferMeter?) throws(FerryError) -> String {
        let bucketDir = try bucketDirectory(input.bucket)
        let blob = try NewBlob(in: bucketDir)
        // Closing releases the blob's lock: only once its entry is committed (or it is removed).
        defer { close(blob.descriptor) }
        let md5 = Digest.Hasher.md5()
        do throws(FerryError) {
            try write(body, into: blob.descriptor, path: blob.path, progress: progress) { md5.update($0) }
        } catch {
            unlink(blob.path)
            throw error
        }
        let entry = IndexEntry(key: input.key, blob: blob.name, size: body.length, eTag: "\"\(md5.finish().hexString)\"",
                               contentType: input.contentType, metadata: input.metadata,
                               lastModified: Date().timeIntervalSince1970)
        try commitObject(entry, bucketDir: bucketDir, ifAbsent: input.ifNoneMatch)
        return entry.eTag
    }

    /// Makes `entry`, whose blob is written and fsynced, the object's state
    /// and durable: the blob's name, then the index entry (renamed into
    /// place), each made durable by a directory fsync shared with concurrent
    /// writes. Removes the blob the entry replaced; on failure, its own.
    func commitObject(_ entry: IndexEntry, bucketDir: URL, ifAbsent: Bool) throws(FerryError) {
        let blobPath = bucketDir.appendingPathComponent("blobs/\(entry.blob)").path
        let replaced: IndexEntry?
        do throws(FerryError) {
            try syncDirectory(bucketDir.appendingPathComponent("blobs"))
            replaced = try commitIndex(entry, bucketDir: bucketDir, ifAbsent: ifAbsent)
        } catch {
            unlink(blobPath)
            throw error
        }
        if let replaced { unlink(bucketDir.appendingPathComponent("blobs/\(replaced.blob)").path) }
        // The entry is in place; a failed fsync here says it may not survive a power loss.
        try syncDirectory(bucketDir.appendingPathComponent("index"))
    }

    /// Blocks until `directory`'s entries as they are now are on disk. For
    /// the store's lasting directories (a bucket's `blobs`, `index`, `uploads`),
    /// whose fsyncs concurrent writes share.
    func syncDirectory(_ directory: URL) throws(FerryError) {
        let sync = directorySyncs.withLock { syncs in
            if let known = syncs[directory.path] { return known }
            let made = DirectorySync(path: directory.path, fsync: fsyncDirectory)
            syncs[directory.path] = made
            return made
        }
        try sync.sync()
    }

    /// The same for a directory that comes and goes (a multipart upload's):
    /// an fsync of its own, so no `DirectorySync` is kept for it.
    func syncTransientDirectory(_ directory: URL) throws(FerryError) {
        BlockingPool.assertOnPoolThread("a directory fsync")
        if let failure = fsyncDirectory(directory.path) { throw failure }
    }

    func bucketDirectory(_ bucket: String, create: Bool = true) throws(FerryError) -> URL {
        BlockingPool.assertOnPoolThread("the local store's bucket directory")
        guard !bucket.isEmpty, !bucket.contains("/"), bucket != ".", bucket != "..", !bucket.hasPrefix(".") else {
            throw FerryError(.invalidRequest, "invalid bucket name '\(bucket)'")
        }
        let dir = root.appendingPathComponent(bucket, isDirectory: true)
        if create {
            // A new bucket's names are made durable before anything is written into it.
            let madeBucket = try makeDirectory(dir)
            var madeInside = false
            for sub in ["blobs", "index", "uploads"] where try makeDirectory(dir.appendingPathComponent(sub)) { madeInside = true }
            if madeBucket { try syncDirectory(root) }
            if madeInside { try syncDirectory(dir) }
        }
        return dir
    }

    /// Creates `dir`; true when it did, false when the name was taken already
    /// (one syscall on every write: a file in a directory's place fails the
    /// write that goes on into it, with ENOTDIR).
    func makeDirectory(_ dir: URL) throws(FerryError) -> Bool {
        if mkdir(dir.path, 0o755) == 0 { return true }
        let error = errno
        guard error == EEXIST else {
            throw FerryError(.localIOError, "cannot create directory \(dir.path): \(String(cString: strerror(error)))")
        }
        return false
    }

    private func indexURL(key: String, bucketDir: URL) -> URL {
        bucketDir.appendingPathComponent("index/\(Digest.sha256(Array(key.utf8)).hexString).json")
    }

    func readIndex(key: String, bucketDir: URL) -> IndexEntry? {
        BlockingPool.assertOnPoolThread("reading the local store's index")
        guard let data = FileManager.default.contents(atPath: indexURL(key: key, bucketDir: bucketDir).path),
              let entry = try? JSONDecoder().decode(IndexEntry.self, from: data), entry.key == key else { return nil }
        return entry
    }

    /// Makes `entry` the object's current state; returns the state it replaced.
    /// `ifAbsent`: only when the key holds no object (else `preconditionFailed`), checked under the lock.
    func commitIndex(_ entry: IndexEntry, bucketDir: URL, ifAbsent: Bool = false) throws(FerryError) -> IndexEntry? {
        let target = indexURL(key: entry.key, bucketDir: bucketDir)
        let temp = bucketDir.appendingPathComponent("index/.tmp-\(UUID().uuidString)")
        let data: [UInt8]
        do {
            data = try FerryJSON.encode(entry)
        } catch {
            throw FerryError(.localIOError, "cannot encode object index: \(error.localizedDescription)")
        }
        // Durable before the rename makes it the object's state.
        try writeFile(.bytes(Array(data)), to: temp.path, progress: nil)
        return try indexLock.withLock { _ throws(FerryError) -> IndexEntry? in
            let previous = readIndex(key: entry.key, bucketDir: bucketDir)
            if ifAbsent, previous != nil {
                unlink(temp.path)
                throw FerryError(.preconditionFailed, "PutObject: \(entry.key) already holds an object (If-None-Match: *)")
            }
            guard rename(temp.path, target.path) == 0 else {
                unlink(temp.path)
                throw FerryError(.localIOError, "cannot commit object index: \(String(cString: strerror(errno)))")
            }
            return previous
        }
    }

    /// Writes the body to a new file and fsyncs it, showing each chunk written
    /// to `written`; removes the file if that fails.
    func writeFile(_ body: ObjectBody, to path: String, progress: TransferMeter?,
                   written observe: (UnsafeRawBufferPointer) -> Void = { _ in }) throws(FerryError) {
        BlockingPool.assertOnPoolThread("writing a local store's file")
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw FerryError(.localIOError, "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        do throws(FerryError) {
            try write(body, into: fd, path: path, progress: progress, written: observe)
        } catch {
            unlink(path)
            throw error
        }
    }

    /// Writes the body from the start of the open file `fd` (named `path`) and fsyncs it.
    func write(_ body: ObjectBody, into fd: Int32, path: String, progress: TransferMeter?,
               written observe: (UnsafeRawBufferPointer) -> Void = { _ in }) throws(FerryError) {
        BlockingPool.assertOnPoolThread("writing a local store's file")
        var written: Int64 = 0
        var failure: FerryError?
        try body.read { chunk in
            guard failure == nil else { return }
            if progress?.isAborted == true { failure = FerryError(.cancelled, "transfer cancelled"); return }
            do throws(FerryError) {
                try FileCopy.writeAll(chunk, to: fd, at: written)
            } catch { failure = error; return }
            observe(chunk)
            written += Int64(chunk.count)
            progress?.add(Int64(chunk.count))
        }
        if let failure { throw failure }
        guard fsync(fd) == 0 else {
            throw FerryError(.localIOError, "fsync \(path): \(String(cString: strerror(errno)))")
        }
    }

    func attributes(_ entry: IndexEntry) -> ObjectAttributes {
        ObjectAttributes(size: entry.size, eTag: entry.eTag, contentType: entry.contentType, metadata: entry.metadata,
                         lastModified: Date(timeIntervalSince1970: entry.lastModified), versionId: nil)
    }

    static func requestId() -> String {
        (0..<8).map { _ in UInt8.random(in: 0...255) }.hexString.uppercased()
    }

    static func hostId() -> String {
        Data((0..<24).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
    }
}
