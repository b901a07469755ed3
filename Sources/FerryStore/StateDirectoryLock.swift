import FerryCore
import Foundation
import Synchronization

/// One worker process per state directory. Two sharing one would each drain
/// the same outbox and take the other's journaled transfers for their own
/// (the upload sweeper could abort a multipart upload the other is sending),
/// so the second is refused at start, naming the first.
///
/// An exclusive `flock` on `<dir>/ferry.lock`, held while the worker runs.
/// The kernel drops it when the process ends, `kill -9` included, so a crash
/// never leaves a stale lock for the next start to trip on.
public final class StateDirectoryLock: Sendable {
    private let descriptor: Mutex<Int32?>
    public let path: String

    /// Takes the lock, writing `holder` (who holds it, for the refusal of the next) into the file.
    public init(directory: URL, holder: String) throws(FerryError) {
        path = directory.appendingPathComponent("ferry.lock").path
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw FerryError(.localIOError, "cannot create state directory \(directory.path): \(error.localizedDescription)")
        }
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw FerryError(.localIOError, "cannot open \(path): \(String(cString: strerror(errno)))") }
        var locked = flock(fd, LOCK_EX | LOCK_NB)
        while locked != 0 && errno == EINTR { locked = flock(fd, LOCK_EX | LOCK_NB) }
        guard locked == 0 else {
            let error = errno
            let other = Self.holder(fd)
            close(fd)
            guard error == EWOULDBLOCK else {
                throw FerryError(.localIOError, "cannot lock \(path): \(String(cString: strerror(error)))")
            }
            throw FerryError(.localIOError, """
                state directory \(directory.path) is in use by another worker (\(other ?? "holder unknown")); \
                give each worker on a machine its own --state-dir
                """)
        }
        let text = Array("\(holder), pid \(getpid())\n".utf8)
        if ftruncate(fd, 0) == 0 { _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } }
        descriptor = Mutex(fd)
    }

    /// Gives the lock up; the next worker may then start on the directory.
    public func release() {
        if let fd = descriptor.withLock({ value -> Int32? in defer { value = nil }; return value }) { close(fd) }
    }

    deinit { release() }

    /// What the holder wrote, clipped and made printable.
    private static func holder(_ fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: buffer.prefix(count), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : TerminalText.visible(text)
    }
}
