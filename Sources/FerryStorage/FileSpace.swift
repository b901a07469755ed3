import CFerryProcess
import Glibc

/// Disk space for a file that is about to be written out of order.
public enum FileSpace {
    /// Reserves `length` bytes for `fd` (fallocate, which also sets the size
    /// when it grows): ranges written later land in allocated blocks instead of
    /// making the filesystem allocate piece by piece. False where the
    /// filesystem cannot; writes then allocate as they go.
    @discardableResult
    public static func reserve(_ fd: Int32, length: Int64) -> Bool {
        length > 0 && ferry_reserve_file_space(fd, length) == 0
    }

    /// Bytes `fd`'s file still needs to reach `length` (what it already holds
    /// allocated counts), and what its filesystem has free for this user, when
    /// that is not enough; nil when it is (or the figures cannot be read).
    public static func shortfall(_ fd: Int32, length: Int64) -> (needed: Int64, free: Int64)? {
        var fs = statvfs(), st = stat()
        guard fstatvfs(fd, &fs) == 0, fstat(fd, &st) == 0 else { return nil }
        let free = Int64(clamping: UInt64(fs.f_bavail).multipliedReportingOverflow(by: UInt64(fs.f_frsize)).partialValue)
        let held = Int64(clamping: st.st_blocks).multipliedReportingOverflow(by: 512)
        let needed = held.overflow ? 0 : (length > held.partialValue ? length - held.partialValue : 0)
        return needed > free ? (needed, free) : nil
    }
}
