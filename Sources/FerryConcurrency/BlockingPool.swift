import FerryCore
import DequeModule
import Foundation
import Synchronization

/// The one place blocking work runs: hashing and re-reading files, fsync,
/// local file copies, librdkafka's blocking calls. A fixed set of threads,
/// so Swift's cooperative pool (one thread per core) never waits on a disk
/// or a broker, and the number of threads does not grow with the load.
/// (HTTP requests run on the transport's own threads; SQLite on GRDB's queues.)
public final class BlockingPool: @unchecked Sendable {
    /// Sized for work that mostly waits (disk, broker round trips) on few cores.
    public static let shared: BlockingPool = {
        sharedStarted.store(true, ordering: .releasing)
        return BlockingPool(threads: max(8, 2 * ProcessInfo.processInfo.activeProcessorCount), name: "ferry-blk")
    }()
    private static let sharedStarted = Atomic<Bool>(false)

    /// Shuts down `shared` if the process ever started it (see `shutdown(within:)`).
    @discardableResult
    public static func shutdownShared(within timeout: Duration) -> Bool {
        guard sharedStarted.load(ordering: .acquiring) else { return true }
        return shared.shutdown(within: timeout)
    }

    public let threadCount: Int
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var closed = false
    private var liveThreads: Int
    /// A taken job leaves the queue at once, and with it what it captured (a
    /// Kafka consumer, a file, a buffer): an array with a moving head kept
    /// them up to 1,024 jobs longer, and a test process kept 100 closed
    /// consumers' librdkafka handles, with their threads and files, that way.
    private var jobs = Deque<() -> Void>()

    public init(threads: Int, name: String) {
        precondition(threads > 0, "a pool needs a thread")
        threadCount = threads
        liveThreads = threads
        for i in 0..<threads {
            let threadName = "\(name)-\(i)"
            ProcessThreads.start(threadName) { [self] in
                pthread_setspecific(Self.poolThreadKey, UnsafeRawPointer(bitPattern: 1))
                self.work()
            }
        }
    }

    /// Set on every pool thread (of any pool), read by `isPoolThread`.
    private static let poolThreadKey: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "no thread-specific key left")
        return key
    }()

    /// Whether the calling thread belongs to a `BlockingPool`.
    public static var isPoolThread: Bool { pthread_getspecific(poolThreadKey) != nil }

    /// Stops a debug build (tests) when blocking work is about to run off the
    /// pools, e.g. on the cooperative pool; nothing in release builds.
    public static func assertOnPoolThread(_ what: @autoclosure () -> String,
                                          file: StaticString = #fileID, line: UInt = #line) {
        assert(isPoolThread, "\(what()) blocks: run it on BlockingPool", file: file, line: line)
    }

    /// Runs `body` on one of the pool's threads and returns its result.
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws(FerryError) -> T) async throws(FerryError) -> T {
        let result: Result<T, FerryError> = await withCheckedContinuation { continuation in
            submit { continuation.resume(returning: Result { () throws(FerryError) -> T in try body() }) }
        }
        return try result.get()
    }

    /// The same for work that cannot fail.
    public func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            submit { continuation.resume(returning: body()) }
        }
    }

    /// Jobs waiting for a thread now.
    public var queued: Int {
        condition.lock()
        defer { condition.unlock() }
        return jobs.count
    }

    /// Stops the pool at the end of the process: the jobs already queued still
    /// run (a download's fsync, a Kafka commit), then the threads end. Returns
    /// whether they all ended within `timeout`. Work submitted afterwards runs
    /// on the caller's thread, so nothing waits for a pool that is gone.
    @discardableResult
    public func shutdown(within timeout: Duration) -> Bool {
        let deadline = Date().addingTimeInterval(Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)
        condition.lock()
        defer { condition.unlock() }
        closed = true
        condition.broadcast()
        while liveThreads > 0 {
            if !condition.wait(until: deadline) { break }
        }
        return liveThreads == 0
    }

    /// Threads still running: all of them until `shutdown`, none once it has drained the queue.
    public var runningThreads: Int {
        condition.lock()
        defer { condition.unlock() }
        return liveThreads
    }

    private func submit(_ job: @escaping () -> Void) {
        condition.lock()
        if closed {
            condition.unlock()
            job()
            return
        }
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            while jobs.isEmpty && !closed { condition.wait() }
            guard !jobs.isEmpty else {
                liveThreads -= 1
                condition.broadcast()
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job()
        }
    }
}

/// Runs `body` where the caller's cancellation does not reach: for cleanup
/// that must still talk to storage after its transfer was cancelled (an
/// HTTP request of a cancelled task is aborted at once).
public func withoutCancellation<T: Sendable>(_ body: @escaping @Sendable () async -> T) async -> T {
    await Task { await body() }.value
}
