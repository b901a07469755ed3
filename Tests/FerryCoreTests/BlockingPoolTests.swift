import FerryCore
import FerryTestSupport
import Foundation
import Synchronization
import Testing
import FerryConcurrency

/// Blocking work runs on the pool's own threads: as many at once as it has,
/// whatever the cooperative pool's width, and never more threads than that.
@Suite struct BlockingPoolTests {
    final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    /// Threads of this process whose name starts with `prefix` (from /proc).
    func threads(named prefix: String) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { task in
            guard let handle = FileHandle(forReadingAtPath: "/proc/self/task/\(task)/comm"),
                  let data = try? handle.readToEnd() else { return false }
            return String(decoding: data, as: UTF8.self).hasPrefix(prefix)
        }.count
    }

    @Test func everyThreadBlocksAtOnceAndTheCooperativePoolStaysFree() async throws {
        let pool = BlockingPool(threads: 6, name: "bp-test")
        // Each job waits until all six are waiting: only six real threads can get there
        // (the cooperative pool has one per core, two on the CI machine).
        let arrived = Counter()
        let release = DispatchSemaphore(value: 0)
        let jobs = Task {
            await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        await pool.run { () -> Bool in
                            arrived.value.add(1, ordering: .relaxed)
                            // Only a guard against hanging the suite: beside the whole suite on
                            // two loaded cores the cooperative task below took over 30 s to run.
                            return release.wait(timeout: .now() + 600) == .success
                        }
                    }
                }
                return await group.reduce(true) { $0 && $1 }
            }
        }
        // A bound for the threads to start, not a speed check: under ThreadSanitizer beside
        // 150 other tests, six new threads took over 10 s to run their first job.
        let allBlocked = await eventually(timeout: 60, every: 0.05) { arrived.value.load(ordering: .relaxed) == 6 }
        #expect(allBlocked, "\(arrived.value.load(ordering: .relaxed)) of 6 jobs running at once")
        // While every pool thread is blocked, async work still runs.
        let cooperative = await Task { (0..<1000).reduce(0, +) }.value
        #expect(cooperative == 499_500)
        for _ in 0..<6 { release.signal() }
        #expect(await jobs.value)
    }

    @Test func aBurstDoesNotAddThreads() async throws {
        let pool = BlockingPool(threads: 3, name: "bp-burst")
        // Threads name themselves when they first run; on a loaded machine that takes a moment.
        #expect(await eventually(timeout: 20, every: 0.05) { threads(named: "bp-burst") == 3 })
        let total = await withTaskGroup(of: Int.self) { group in
            for i in 0..<500 { group.addTask { await pool.run { usleep(200); return i } } }
            return await group.reduce(0, +)
        }
        #expect(total == 124_750)
        #expect(threads(named: "bp-burst") == 3)
        #expect(pool.queued == 0)
    }

    @Test func errorsComeBackTyped() async {
        let pool = BlockingPool(threads: 1, name: "bp-error")
        await #expect(throws: FerryError.self) {
            try await pool.run { () throws(FerryError) -> Int in throw FerryError(.localIOError, "disk says no") }
        }
    }

    final class Tracked: Sendable {
        let alive: Counter
        init(_ alive: Counter) { self.alive = alive; alive.value.add(1, ordering: .relaxed) }
        deinit { alive.value.subtract(1, ordering: .relaxed) }
    }

    /// A job that has run keeps nothing alive: what it captured (in Ferry, a
    /// closed Kafka consumer with its librdkafka threads and sockets, a file,
    /// a buffer) goes as soon as it returns, not some jobs later.
    @Test func whatAJobCapturedGoesWhenItHasRun() async throws {
        let pool = BlockingPool(threads: 2, name: "bp-release")
        let alive = Counter()
        for _ in 0..<50 {
            let tracked = Tracked(alive)
            await pool.run { _ = tracked }
        }
        let released = await eventually(timeout: 10, every: 0.05) { alive.value.load(ordering: .relaxed) == 0 }
        #expect(released, "\(alive.value.load(ordering: .relaxed)) of 50 jobs' captures still alive")
    }

    /// Shutdown at the end of a process: what is queued still runs, then the
    /// threads end (seen in /proc); work after it runs on the caller's thread.
    @Test func shutdownRunsWhatIsQueuedThenEndsTheThreads() async throws {
        let name = "bp-down-\(UInt16.random(in: 0...UInt16.max))"
        let pool = BlockingPool(threads: 2, name: name)
        let done = Counter()
        let queued = Task {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<6 {
                    group.addTask { await pool.run { usleep(30_000); done.value.add(1, ordering: .relaxed) } }
                }
            }
        }
        // Let every job reach the queue before the shutdown.
        for _ in 0..<200 where pool.queued < 4 { try await Task.sleep(for: .milliseconds(5)) }
        #expect(pool.shutdown(within: .seconds(10)), "the pool's threads did not end")
        #expect(done.value.load(ordering: .relaxed) == 6, "shutdown ended before the queued jobs ran")
        await queued.value
        #expect(pool.runningThreads == 0)
        var alive = 2
        for _ in 0..<100 where alive > 0 {
            alive = threads(named: name)
            if alive > 0 { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(alive == 0, "\(alive) pool threads still in /proc/self/task")
        #expect(await pool.run { 41 + 1 } == 42, "work after shutdown did not run")
    }

    /// A job that outlasts the time given is reported, not waited for without end.
    @Test func shutdownGivesUpOnAJobThatOutlastsItsTime() async throws {
        let pool = BlockingPool(threads: 1, name: "bp-stuck")
        let release = DispatchSemaphore(value: 0)
        let stuck = Task { await pool.run { _ = release.wait(timeout: .now() + 30) } }
        for _ in 0..<200 where pool.queued > 0 || pool.runningThreads == 0 { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(50))
        let started = ContinuousClock.now
        #expect(!pool.shutdown(within: .milliseconds(200)))
        #expect(ContinuousClock.now - started < .seconds(5))
        release.signal()
        await stuck.value
    }
}
