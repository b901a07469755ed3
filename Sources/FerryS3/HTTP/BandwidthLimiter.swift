import Foundation
import Synchronization

/// One bandwidth budget shared by every connection of a transport: each chunk
/// of body bytes books its share of time on a common clock, and the transport
/// thread moving it waits for its slot. Used from curl's callbacks, which run
/// on the transport's own threads, never on Swift's cooperative pool.
final class BandwidthLimiter: Sendable {
    private let bytesPerSecond: Double
    /// When the next byte may move, in monotonic seconds.
    private let nextFree = Mutex<Double>(0)

    init(bytesPerSecond: Int64) { self.bytesPerSecond = Double(max(1, bytesPerSecond)) }

    /// Blocks the calling transport thread until `bytes` may move.
    func consume(_ bytes: Int) {
        let now = Self.now()
        let start = nextFree.withLock { next in
            // Unused budget is not saved up beyond a quarter second, so bursts stay small.
            let begin = max(next, now - 0.25)
            next = begin + Double(bytes) / bytesPerSecond
            return begin
        }
        let wait = start - now
        if wait > 0 { usleep(useconds_t(min(wait, 10) * 1_000_000)) }
    }

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
