import FerryCore
import Testing
import FerryConcurrency

@Suite struct WarningThrottleTests {
    /// A burst yields one line per interval, and each line counts everything since the one before.
    @Test func oneLinePerIntervalCountingTheRest() {
        let throttle = WarningThrottle(interval: .seconds(10))
        let start = ContinuousClock.now
        var lines: [Int] = []
        // 100 occurrences a second for 25 s: lines at 0 s, 10 s and 20 s.
        for tick in 0..<2500 {
            if let count = throttle.occurred(at: start + .milliseconds(tick * 10)) { lines.append(count) }
        }
        #expect(lines == [1, 1000, 1000])
        // Quiet for a while: the next one is logged at once, alone.
        #expect(throttle.occurred(at: start + .seconds(60)) == 500)
        #expect(throttle.occurred(at: start + .seconds(61)) == nil)
    }
}
