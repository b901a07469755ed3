import FerryCore
import FerryStorage
import Foundation
import FerryConcurrency

/// Makes the names created or renamed in one directory durable: `sync()`
/// returns once an fsync of the directory that began after the call has
/// finished. Callers that arrive while one fsync runs share the next one
/// (a group commit), so a burst of writes costs a few directory fsyncs, not
/// one each. A file's own fsync does not cover its name in its directory
/// (POSIX; some file systems do it anyway).
final class DirectorySync: @unchecked Sendable {
    let path: String
    private let fsyncPath: @Sendable (String) -> FerryError?
    // Guarded by `condition`.
    private let condition = NSCondition()
    /// Calls so far; every call up to `synced` is covered by a finished fsync.
    private var requested: UInt64 = 0
    private var synced: UInt64 = 0
    private var syncing = false

    /// `fsync` is replaced only by tests (to see when each one runs).
    init(path: String, fsync: @escaping @Sendable (String) -> FerryError? = DirectorySync.fsyncDirectory) {
        self.path = path
        fsyncPath = fsync
    }

    /// Blocks until the directory's entries as they are now are on disk.
    func sync() throws(FerryError) {
        BlockingPool.assertOnPoolThread("a directory fsync")
        condition.lock()
        defer { condition.unlock() }
        requested += 1
        let ticket = requested
        while synced < ticket {
            if syncing {
                condition.wait()
                continue
            }
            // Lead: one fsync for every call made before it starts.
            syncing = true
            let covers = requested
            condition.unlock()
            let failure = fsyncPath(path)
            condition.lock()
            syncing = false
            if failure == nil { synced = max(synced, covers) }
            condition.broadcast()
            if let failure { throw failure }
        }
    }

    static func fsyncDirectory(_ path: String) -> FerryError? {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return FerryError(.localIOError, "cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { return FerryError(.localIOError, "fsync \(path): \(String(cString: strerror(errno)))") }
        return nil
    }
}
