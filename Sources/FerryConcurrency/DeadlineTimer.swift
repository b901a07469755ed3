import Dispatch
import Foundation
import Synchronization

/// A one-shot timer that can be cancelled.
///
/// For deadlines that are usually cancelled long before they fire (a
/// transfer's 50-minute timeout, a check's watchdog, a wait for delivery
/// reports): a few per request. `Task.sleep` and `DispatchQueue.asyncAfter`
/// keep their timer, and the memory behind it, until the deadline even when
/// cancelled (about 300 bytes per transfer held for the whole timeout). A
/// dispatch timer source is freed at once but wakes libdispatch's manager
/// thread when it is armed and again when it is cancelled. These timers live
/// in one heap served by one thread: arming one wakes that thread only when
/// it becomes the earliest deadline, cancelling one never does, and its memory
/// is freed at once. The action runs on a global dispatch queue, so it runs
/// even when the cooperative pool is busy.
public final class DeadlineTimer: @unchecked Sendable {
    fileprivate let deadline: UInt64  // CLOCK_MONOTONIC nanoseconds
    fileprivate let action: @Sendable () -> Void
    /// Where the timer sits in the heap; -1 once fired or cancelled. Guarded by `TimerThread`'s mutex.
    fileprivate var index = -1
    /// Set by `cancel`: a timer already taken off the heap to fire is stopped before its action.
    fileprivate let cancelled = Atomic<Bool>(false)

    private init(deadline: UInt64, action: @escaping @Sendable () -> Void) {
        self.deadline = deadline
        self.action = action
    }

    /// Runs `action` after `seconds` (clamped to 0…ten years) unless cancelled first.
    public static func start(after seconds: Double, _ action: @escaping @Sendable () -> Void) -> DeadlineTimer {
        let delay = Duration.seconds(clamping: seconds).components
        let nanoseconds = UInt64(delay.seconds) * 1_000_000_000 + UInt64(delay.attoseconds / 1_000_000_000)
        let timer = DeadlineTimer(deadline: TimerThread.now() &+ nanoseconds, action: action)
        TimerThread.shared.insert(timer)
        return timer
    }

    /// The action will not run (if it has not yet); the timer's memory is freed.
    public func cancel() {
        cancelled.store(true, ordering: .relaxed)
        TimerThread.shared.remove(self)
    }
}

/// The thread behind `DeadlineTimer`: a binary min-heap of deadlines under a
/// pthread mutex, waited on with a condition on the monotonic clock (a wall
/// clock step neither fires a timer early nor holds it back).
private final class TimerThread: @unchecked Sendable {
    static let shared = TimerThread()

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    // Guarded by `mutex`.
    private var heap: [DeadlineTimer] = []

    private init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
        ProcessThreads.start("ferry-timers") { [self] in run() }
    }

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    func insert(_ timer: DeadlineTimer) {
        pthread_mutex_lock(mutex)
        timer.index = heap.count
        heap.append(timer)
        siftUp(heap.count - 1)
        // Only a new earliest deadline changes how long the thread sleeps.
        if timer.index == 0 { pthread_cond_signal(condition) }
        pthread_mutex_unlock(mutex)
    }

    func remove(_ timer: DeadlineTimer) {
        pthread_mutex_lock(mutex)
        if timer.index >= 0 { removeAt(timer.index) }
        pthread_mutex_unlock(mutex)
    }

    private func run() {
        pthread_mutex_lock(mutex)
        while true {
            // Only the deadline: holding the timer itself through the wait would keep a
            // cancelled one (and what its action holds) alive until the thread wakes.
            guard let earliest = heap.first?.deadline else {
                pthread_cond_wait(condition, mutex)
                continue
            }
            let now = Self.now()
            guard earliest <= now else {
                var until = timespec(tv_sec: Int(earliest / 1_000_000_000), tv_nsec: Int(earliest % 1_000_000_000))
                pthread_cond_timedwait(condition, mutex, &until)
                continue
            }
            var due: [DeadlineTimer] = []
            while let next = heap.first, next.deadline <= now {
                removeAt(0)
                due.append(next)
            }
            pthread_mutex_unlock(mutex)
            for timer in due {
                ProcessThreads.dispatch {
                    if !timer.cancelled.load(ordering: .relaxed) { timer.action() }
                }
            }
            pthread_mutex_lock(mutex)
        }
    }

    // MARK: the heap (callers hold `mutex`)

    private func removeAt(_ i: Int) {
        let removed = heap[i]
        removed.index = -1
        let last = heap.removeLast()
        guard i < heap.count else { return }
        heap[i] = last
        last.index = i
        siftDown(i)
        siftUp(last.index)
    }

    private func siftUp(_ start: Int) {
        var i = start
        while i > 0 {
            let parent = (i - 1) / 2
            guard heap[i].deadline < heap[parent].deadline else { break }
            swapAt(i, parent)
            i = parent
        }
    }

    private func siftDown(_ start: Int) {
        var i = start
        while true {
            let left = 2 * i + 1, right = left + 1
            var smallest = i
            if left < heap.count, heap[left].deadline < heap[smallest].deadline { smallest = left }
            if right < heap.count, heap[right].deadline < heap[smallest].deadline { smallest = right }
            guard smallest != i else { return }
            swapAt(i, smallest)
            i = smallest
        }
    }

    private func swapAt(_ a: Int, _ b: Int) {
        heap.swapAt(a, b)
        heap[a].index = a
        heap[b].index = b
    }
}
