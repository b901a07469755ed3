import FerryCore
import FerryStorage
import Foundation

/// A blob being written: created new and held under an exclusive `flock`
/// until the caller closes `descriptor`, which it does only after the blob's
/// index entry is committed (or the blob removed). A reclaim sweep takes the
/// same lock before it removes a blob, so it never removes the bytes of a
/// write in flight, in this process or in another sharing the directory.
struct NewBlob {
    let name: String
    let path: String
    let descriptor: Int32

    init(in bucketDir: URL) throws(FerryError) {
        name = UUID().uuidString
        path = bucketDir.appendingPathComponent("blobs/\(name)").path
        // Created under a hidden name, locked, then renamed: a sweep never sees the blob unlocked.
        let hidden = bucketDir.appendingPathComponent("blobs/\(NewBlob.hiddenPrefix)\(name)").path
        descriptor = open(hidden, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw FerryError(.localIOError, "cannot create \(hidden): \(String(cString: strerror(errno)))")
        }
        var locked = flock(descriptor, LOCK_EX)
        while locked != 0 && errno == EINTR { locked = flock(descriptor, LOCK_EX) }
        guard locked == 0, rename(hidden, path) == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            unlink(hidden)
            throw FerryError(.localIOError, "cannot create \(path): \(reason)")
        }
    }

    /// A blob's name while it is created (only a crash in those microseconds leaves one).
    static let hiddenPrefix = ".new-"
}

/// What one reclaim pass removed, and what it could not look at.
public struct LocalStoreReclaim: Sendable, Equatable {
    /// Blobs that no index entry named.
    public var blobs = 0
    /// The bytes of those blobs and of the removed uploads' parts.
    public var bytes: Int64 = 0
    /// Temp index entries (`index/.tmp-…`) of writes that never committed.
    public var tempEntries = 0
    /// Multipart uploads left idle past the age asked for, or whose record a crash cut short.
    public var uploads = 0
    /// Buckets whose blobs were left alone, with the reason (an index entry that cannot be read).
    public var skipped: [String] = []

    public init() {}
}

extension LocalObjectStore {
    /// Removes what writes cut short by a crash left behind: a blob written but
    /// never named by an index entry (or named by one that was replaced before
    /// its writer could remove it), and a temp index entry never renamed into
    /// place. Only files untouched for `grace` are looked at, and a blob only
    /// while this sweep holds its lock (`NewBlob`): a write in flight holds it.
    /// With `idleUploadsAfter`, also multipart uploads that no call has touched
    /// for that long (what S3's AbortIncompleteMultipartUpload lifecycle rule
    /// does, counted from the last part instead of the start); an upload
    /// resumes from its directory, so without it they are left alone.
    /// `inUse` names the uploads a transfer of this process holds (a paused one may be idle): they stay.
    public func reclaimAbandonedWrites(grace: TimeInterval = 600, idleUploadsAfter: TimeInterval? = nil,
                                       inUse: @escaping @Sendable (String) -> Bool = { _ in false }) async throws(FerryError) -> LocalStoreReclaim {
        try await onDisk { () throws(FerryError) -> LocalStoreReclaim in
            var total = LocalStoreReclaim()
            let now = Date().timeIntervalSince1970
            let cutoff = Cutoff(grace: now - grace, now: now)
            for bucket in self.bucketNames() {
                let bucketDir = self.root.appendingPathComponent(bucket, isDirectory: true)
                let (uploads, uploadBytes) = self.reclaimUploads(in: bucketDir, cutoff: cutoff, idleCutoff: idleUploadsAfter.map { now - $0 },
                                                                 inUse: inUse)
                total.uploads += uploads
                total.bytes += uploadBytes
                // Blobs before the temp entries that name them: a blob is then locked
                // once per pass. Locked twice, the first lock's descriptor can live on
                // in a child process this one spawns (between its fork and its exec),
                // and the second attempt finds the blob busy and leaves it.
                do throws(FerryError) {
                    let (blobs, bytes) = try self.reclaimBlobs(in: bucketDir, cutoff: cutoff)
                    total.blobs += blobs
                    total.bytes += bytes
                } catch {
                    total.skipped.append("\(bucket): \(error.message)")
                }
                total.tempEntries += self.reclaimTempEntries(in: bucketDir, cutoff: cutoff)
            }
            return total
        }
    }

    /// Files last modified before these are looked at.
    struct Cutoff {
        /// Any leftover: older than the grace.
        let grace: TimeInterval
        /// What only a crash leaves (a torn temp entry or upload record, a blob under
        /// its creation name): written in microseconds, so also at least a minute old.
        let crashed: TimeInterval

        init(grace: TimeInterval, now: TimeInterval) {
            self.grace = grace
            crashed = min(grace, now - 60)
        }
    }

    /// The store's buckets: its directories that hold a `blobs` and an `index` directory.
    private func bucketNames() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        return names.filter { name in
            guard !name.hasPrefix(".") else { return false }
            let dir = root.appendingPathComponent(name)
            return Self.isDirectory(dir.appendingPathComponent("blobs").path) && Self.isDirectory(dir.appendingPathComponent("index").path)
        }.sorted()
    }

    /// Removes the bucket's temp index entries older than `cutoff` whose blob no write holds.
    private func reclaimTempEntries(in bucketDir: URL, cutoff: Cutoff) -> Int {
        let indexDir = bucketDir.appendingPathComponent("index")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: indexDir.path)) ?? []
        var removed = 0
        for name in names where name.hasPrefix(".tmp-") {
            let path = indexDir.appendingPathComponent(name).path
            guard let modified = Self.modificationTime(path), modified < cutoff.grace else { continue }
            // A temp entry names its write's blob; while that write runs, it holds the blob's lock.
            if let data = FileManager.default.contents(atPath: path),
               let entry = try? JSONDecoder().decode(IndexEntry.self, from: data) {
                let blob = lockBlob(bucketDir: bucketDir, name: entry.blob)
                if case .busy = blob { continue }
                defer { if case .locked(let fd, _) = blob { close(fd) } }
                if unlink(path) == 0 { removed += 1 }
            } else if modified < cutoff.crashed, unlink(path) == 0 {
                // Not a whole entry: its writer died writing it.
                removed += 1
            }
        }
        return removed
    }

    /// Removes the bucket's blobs older than `cutoff` that no index entry names,
    /// and hidden ones a crash left while creating them (`NewBlob`).
    /// Candidates are locked before the index is read again, so a write that
    /// committed meanwhile is seen; a batch at a time bounds open descriptors.
    private func reclaimBlobs(in bucketDir: URL, cutoff: Cutoff) throws(FerryError) -> (Int, Int64) {
        let blobsDir = bucketDir.appendingPathComponent("blobs")
        let named = try namedBlobs(in: bucketDir)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: blobsDir.path)) ?? []
        let candidates = names.filter { name in
            let hidden = name.hasPrefix(NewBlob.hiddenPrefix)
            guard hidden || (!name.hasPrefix(".") && !named.contains(name)),
                  let modified = Self.modificationTime(blobsDir.appendingPathComponent(name).path) else { return false }
            return modified < (hidden ? cutoff.crashed : cutoff.grace)
        }.sorted()
        guard !candidates.isEmpty else { return (0, 0) }
        var removed = 0, bytes: Int64 = 0
        var start = candidates.startIndex
        while start < candidates.endIndex {
            let end = min(start + 256, candidates.endIndex)
            var locked: [(name: String, fd: Int32, size: Int64)] = []
            defer { for blob in locked { close(blob.fd) } }
            for name in candidates[start..<end] {
                if case .locked(let fd, let size) = lockBlob(bucketDir: bucketDir, name: name) { locked.append((name, fd, size)) }
            }
            let namedNow = try namedBlobs(in: bucketDir)
            for blob in locked where !namedNow.contains(blob.name) {
                if unlink(blobsDir.appendingPathComponent(blob.name).path) == 0 {
                    removed += 1
                    bytes += blob.size
                }
            }
            start = end
        }
        if removed > 0 { try syncDirectory(blobsDir) }
        return (removed, bytes)
    }

    /// Removes the bucket's upload directories idle since before `idleCutoff`
    /// (none without one), and those older than `cutoff` without a whole
    /// record (a crash while the upload was created: no call can reach them).
    private func reclaimUploads(in bucketDir: URL, cutoff: Cutoff, idleCutoff: TimeInterval?,
                                inUse: (String) -> Bool) -> (Int, Int64) {
        let uploadsDir = bucketDir.appendingPathComponent("uploads")
        var removed = 0, bytes: Int64 = 0
        for id in (try? FileManager.default.contentsOfDirectory(atPath: uploadsDir.path)) ?? [] where !id.hasPrefix(".") && !inUse(id) {
            let dir = uploadsDir.appendingPathComponent(id)
            let files = ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).map { dir.appendingPathComponent($0).path }
            // Its last activity: the newest of the directory and its files (each part is a new file).
            guard let lastActive = ([dir.path] + files).compactMap(Self.modificationTime).max() else { continue }
            let whole = (try? uploadRecord(dir)) != nil
            let limit = whole ? idleCutoff : cutoff.crashed
            guard let limit, lastActive < limit else { continue }
            let size = files.reduce(Int64(0)) { sum, path in
                var info = stat()
                return sum + (stat(path, &info) == 0 ? Int64(info.st_size) : 0)
            }
            if (try? FileManager.default.removeItem(at: dir)) != nil {
                removed += 1
                bytes += size
            }
        }
        if removed > 0 { try? syncDirectory(uploadsDir) }
        return (removed, bytes)
    }

    /// The blob names the bucket's index entries hold. Throws if an entry
    /// cannot be read: the blob it names is unknown, so none may be removed.
    private func namedBlobs(in bucketDir: URL) throws(FerryError) -> Set<String> {
        let indexDir = bucketDir.appendingPathComponent("index")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: indexDir.path)) ?? []
        var named = Set<String>()
        for name in names where name.hasSuffix(".json") && !name.hasPrefix(".") {
            let path = indexDir.appendingPathComponent(name).path
            guard let data = FileManager.default.contents(atPath: path) else {
                if access(path, F_OK) != 0 { continue } // deleted since the listing
                throw FerryError(.localIOError, "index entry \(name) cannot be read; its blobs are left alone")
            }
            guard let entry = try? JSONDecoder().decode(IndexEntry.self, from: data) else {
                throw FerryError(.localIOError, "index entry \(name) is not a valid entry; its blobs are left alone")
            }
            named.insert(entry.blob)
        }
        return named
    }

    enum BlobLock {
        /// This sweep holds the blob's lock through `fd` (closing it releases the lock).
        case locked(fd: Int32, size: Int64)
        /// A write holds it.
        case busy
        /// There is no such blob (or it cannot be opened).
        case absent
    }

    private func lockBlob(bucketDir: URL, name: String) -> BlobLock {
        guard !name.isEmpty, !name.contains("/"), name != ".", name != ".." else { return .absent }
        let fd = open(bucketDir.appendingPathComponent("blobs/\(name)").path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .absent }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            return .busy
        }
        var info = stat()
        return .locked(fd: fd, size: fstat(fd, &info) == 0 ? Int64(info.st_size) : 0)
    }

    private static func modificationTime(_ path: String) -> TimeInterval? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return TimeInterval(info.st_mtim.tv_sec) + TimeInterval(info.st_mtim.tv_nsec) / 1e9
    }

    private static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }
}
