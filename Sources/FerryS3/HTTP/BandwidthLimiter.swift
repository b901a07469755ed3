import FerryStorage
import Foundation
import Synchronization

/// One bandwidth budget shared by every connection of a transport: each chunk
/// of body bytes books its share of time on a common clock. The event loop's
/// callbacks pause a request whose chunk must wait, and resume it when its
/// slot comes; the loop thread itself never sleeps.
final class BandwidthLimiter: Sendable {
    private let bytesPerSecond: Double
    /// When the next byte may move, in monotonic seconds.
    private let nextFree = Mutex<Double>(0)

    init(bytesPerSecond: Int64) { self.bytesPerSecond = Double(max(1, bytesPerSecond)) }

    /// Books `bytes`; returns how many seconds from now they may move (0: at once).
    func book(_ bytes: Int) -> Double {
        let now = Self.now()
        let start = nextFree.withLock { next in
            // Unused budget is not saved up beyond a quarter second, so bursts stay small.
            let begin = max(next, now - 0.25)
            next = begin + Double(bytes) / bytesPerSecond
            return begin
        }
        return max(0, min(start - now, 10))
    }

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
