import CFerryProcess
import FerryCore
import Foundation
import FerryConcurrency

/// Gives the heap's free pages back to the kernel every few seconds while
/// the worker runs. glibc keeps what a thread frees in that thread's arena;
/// with the blocking pool's eight threads allocating as well, a worker's
/// resident size crept up by a quarter over 100,000 requests (S6) while its
/// heap in use stayed flat. A trim walks the arenas under their locks:
/// 17–27 ms with 126 MiB free in eight threads' arenas, 1.5–2.3 ms with
/// nothing new to give back (measured with a C program on this machine);
/// on the blocking pool, not the cooperative one.
enum HeapTrimmer {
    /// Trims every `interval` until the calling task is cancelled.
    static func run(every interval: Duration = .seconds(5)) async {
        while (try? await Task.sleep(for: interval)) != nil {
            await trimNow()
        }
    }

    /// Trims once.
    static func trimNow() async {
        await BlockingPool.shared.run { _ = ferry_heap_release_free_pages() }
    }

    /// The size from which the worker's allocations get a mapping of their own.
    static let mappedFrom = 128 << 10

    /// Who chose the mmap threshold the worker runs with.
    enum MmapThreshold: Equatable {
        /// Fixed here at `mappedFrom`.
        case fixed
        /// Set by the environment, and left to it.
        case environment
        /// `mallopt` refused the value: glibc's sliding threshold stays.
        case refused
    }

    /// Fixes glibc's mmap threshold at `mappedFrom`, unless the environment
    /// sets it (`GLIBC_TUNABLES`' `glibc.malloc.mmap_threshold`, or
    /// `MALLOC_MMAP_THRESHOLD_`). glibc otherwise raises the threshold to the
    /// size of each mapped block freed, and from then on grows its arenas for
    /// such blocks (librdkafka's fetch buffers, a download's write buffer),
    /// where what is freed stays resident until the next trim, or for good
    /// where a small block pins its pages. S6 on Tansu: resident memory above
    /// the heap in use 25 MiB on average against 45 (NOTES.md, round of
    /// 2026-12-02), the drain as fast.
    @discardableResult
    static func fixMmapThreshold(environment: [String: String] = ProcessInfo.processInfo.environment) -> MmapThreshold {
        if environment["MALLOC_MMAP_THRESHOLD_"] != nil || (environment["GLIBC_TUNABLES"] ?? "").contains("glibc.malloc.mmap_threshold") {
            return .environment
        }
        return ferry_heap_fix_mmap_threshold(mappedFrom) == 1 ? .fixed : .refused
    }
}
