import FerryCore
import FerryTestSupport
import Foundation
import Synchronization
import Testing
import FerryConcurrency

/// Invariants of `DeadlineTimer`, on seeded random schedules: a timer that is
/// not cancelled fires exactly once and never early; one cancelled before its
/// deadline never fires; a cancelled timer's memory is freed at once.
@Suite struct DeadlineTimerTests {
    /// Fire times of one schedule, by timer number.
    final class Firings: Sendable {
        let times = Mutex<[Int: [ContinuousClock.Instant]]>([:])
        func record(_ n: Int) { times.withLock { $0[n, default: []].append(.now) } }
    }

    final class Payload: Sendable {}

    @Test(arguments: [1, 2, 3] as [UInt64])
    func everyTimerFiresOnceOnTimeUnlessCancelled(seed: UInt64) async throws {
        var rng = SeededGenerator(seed: seed)
        let firings = Firings()
        var schedule: [(delay: Double, cancel: Bool, start: ContinuousClock.Instant)] = []
        var timers: [DeadlineTimer] = []
        for n in 0..<300 {
            // Delays from 0 to 300 ms, in random order, so new earliest deadlines keep arriving.
            let delay = Double(rng.next() % 300) / 1000
            // Cancel only timers at least 100 ms away: the cancel surely comes first.
            let cancel = delay >= 0.1 && rng.next() % 2 == 0
            schedule.append((delay, cancel, .now))
            timers.append(DeadlineTimer.start(after: delay) { firings.record(n) })
        }
        for (n, entry) in schedule.enumerated() where entry.cancel { timers[n].cancel() }
        try await Task.sleep(for: .milliseconds(1500))
        let fired = firings.times.withLock { $0 }
        for (n, entry) in schedule.enumerated() {
            let times = fired[n] ?? []
            if entry.cancel {
                #expect(times.isEmpty, "seed \(seed): timer \(n) fired after it was cancelled")
            } else {
                #expect(times.count == 1, "seed \(seed): timer \(n) (\(entry.delay) s) fired \(times.count) times")
                if let time = times.first {
                    #expect(time >= entry.start + .seconds(entry.delay), "seed \(seed): timer \(n) fired early")
                }
            }
        }
        // Cancelling a timer that has fired is harmless.
        for timer in timers { timer.cancel() }
    }

    /// A short timer armed after a long one is not held back by it.
    @Test func aNewEarliestDeadlineWakesTheThread() async throws {
        let long = DeadlineTimer.start(after: 30) {}
        defer { long.cancel() }
        let fired = Mutex<ContinuousClock.Instant?>(nil)
        let start = ContinuousClock.now
        let short = DeadlineTimer.start(after: 0.05) { fired.withLock { $0 = .now } }
        defer { short.cancel() }
        for _ in 0..<200 where fired.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
        let at = try #require(fired.withLock { $0 })
        #expect(at - start >= .milliseconds(50))
        #expect(at - start < .seconds(1.5))
    }

    /// The reason this type exists: a cancelled timer lets go of its action
    /// (and what the action holds) at once, not at its deadline. Also when the
    /// timer thread is waiting on it as the earliest deadline (2 s nearly always
    /// is, beside the other tests' timers): the thread once held that one
    /// through its wait.
    @Test(arguments: [2.0, 3600.0])
    func aCancelledTimerFreesItsActionAtOnce(delay: Double) async throws {
        weak var weakPayload: Payload?
        weak var weakTimer: DeadlineTimer?
        do {
            let payload = Payload()
            weakPayload = payload
            let timer = DeadlineTimer.start(after: delay) { _ = payload }
            weakTimer = timer
            try await Task.sleep(for: .milliseconds(100))  // the thread is waiting now
            timer.cancel()
        }
        #expect(weakTimer == nil, "delay \(delay)")
        #expect(weakPayload == nil, "delay \(delay)")
    }

    /// Deadlines from outside are clamped, never trap: NaN and negative fire at once.
    @Test func outOfRangeDelaysAreClamped() async throws {
        let fired = Mutex(0)
        let timers = [Double.nan, -1, -.infinity].map { DeadlineTimer.start(after: $0) { fired.withLock { $0 += 1 } } }
        let far = [Double.infinity, .greatestFiniteMagnitude, 1e300].map { DeadlineTimer.start(after: $0) {} }
        for _ in 0..<200 where fired.withLock({ $0 }) < 3 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(fired.withLock { $0 } == 3)
        for timer in timers + far { timer.cancel() }
    }
}
