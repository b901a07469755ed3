import Dispatch
import Foundation

/// Every thread a Ferry process starts is started here, and this is the one
/// place that hands work to Dispatch's global queue, so one file shows all of
/// them. The owners, each with one job:
///
/// | thread | started by | why a thread of its own |
/// |---|---|---|
/// | `ferry-blk-N` | `BlockingPool` (fixed size) | blocking C calls and file I/O, off the cooperative pool |
/// | `ferry-timers` | `DeadlineTimer` | one heap of every deadline, woken only when one comes due |
/// | `ferry-kafka-*` | `PollThread`, one per librdkafka handle | librdkafka's blocking poll |
/// | `ferry-kafka-ask` | `KafkaConsumer.committed` | a librdkafka call with no bound of its own |
/// | `ferry-curl-N` | `CurlEventLoop`, one or two per transport | libcurl's multi interface over epoll |
/// | `ferry-md5` | `MD5Lanes`, on the first download that needs it | MD5 of up to sixteen files at a time |
///
/// Dispatch's global queue runs what must not wait for any of Ferry's own
/// threads: deadlines as they fire, a signal's handler, and the watchdogs
/// that end a stuck shutdown or a credential process.
public enum ProcessThreads {
    /// Starts a thread named `name` (at most 15 bytes are kept) that runs `body` to its end.
    public static func start(_ name: String, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread {
            nameCurrentThread(name)
            body()
        }
        thread.name = name
        thread.start()
    }

    /// Runs `body` on Dispatch's global queue.
    public static func dispatch(_ body: @escaping @Sendable () -> Void) {
        DispatchQueue.global().async(execute: body)
    }

    /// Runs `body` on Dispatch's global queue after `seconds` (clamped to a
    /// day), unless the returned item is cancelled first.
    @discardableResult
    public static func after(seconds: Double, _ body: @escaping @Sendable () -> Void) -> DispatchWorkItem {
        let item = DispatchWorkItem(block: body)
        let bounded = seconds.isFinite ? min(max(seconds, 0), 86_400) : 86_400
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(bounded * 1_000_000_000)), execute: item)
        return item
    }

    /// The queue signal sources deliver on.
    public static var signalQueue: DispatchQueue { DispatchQueue.global() }

    /// Names the calling thread (at most 15 bytes on Linux), so `top -H` and
    /// /proc show whose threads these are. `Thread.name` alone is applied only
    /// once `start()` has recorded the thread, which races with the thread's
    /// first instructions (seen: one of three pool threads unnamed).
    private static func nameCurrentThread(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}
