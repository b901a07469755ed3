import CFerryCurlShim

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
}
