import FerryCore
import Foundation

/// Positioned reads and writes between file descriptors.
package enum FileCopy {
    /// Feeds `length` bytes of `fd` from `offset` to `consume`, 1 MiB at a time.
    package static func read(_ fd: Int32, offset: Int64, length: Int64, _ consume: (UnsafeRawBufferPointer) -> Void) throws(FerryError) {
        let capacity = Int(min(Int64(1 << 20), max(length, 1)))
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 16)
        defer { buffer.deallocate() }
        var done: Int64 = 0
        while done < length {
            let want = Int(min(Int64(capacity), length - done))
            let n = pread(fd, buffer.baseAddress, want, off_t(offset + done))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                throw FerryError(.localIOError, n == 0 ? "file ended \(length - done) bytes early (did it shrink?)"
                                                       : "read failed: \(String(cString: strerror(errno)))")
            }
            consume(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            done += Int64(n)
        }
    }

    /// Copies `length` bytes from `source` at `sourceOffset` to `target` at `targetOffset`.
    package static func copy(from source: Int32, at sourceOffset: Int64, to target: Int32, at targetOffset: Int64,
                     length: Int64, progress: TransferMeter? = nil) throws(FerryError) {
        var written: Int64 = 0
        var failure: FerryError?
        try read(source, offset: sourceOffset, length: length) { chunk in
            guard failure == nil else { return }
            if progress?.isAborted == true { failure = FerryError(.cancelled, "transfer cancelled"); return }
            do throws(FerryError) {
                try writeAll(chunk, to: target, at: targetOffset + written)
            } catch { failure = error; return }
            written += Int64(chunk.count)
            progress?.add(Int64(chunk.count))
        }
        if let failure { throw failure }
    }

    package static func writeAll(_ bytes: UnsafeRawBufferPointer, to fd: Int32, at offset: Int64) throws(FerryError) {
        var written = 0
        while written < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + written, bytes.count - written, off_t(offset + Int64(written)))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw FerryError(.localIOError, "write failed: \(String(cString: strerror(errno)))") }
            written += n
        }
    }
}
