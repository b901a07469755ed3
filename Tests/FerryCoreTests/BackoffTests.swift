import FerryCore
import FerryTestSupport
import Foundation
import PropertyBased
import Testing
import FerryConcurrency

/// The process's one retry policy: every wait lies in [0, ceiling], the
/// ceiling doubles from `first` and never passes `cap`, and `.none` waits the
/// ceiling exactly. Retry loops elsewhere use its configurations rather than
/// doubling delays of their own.
@Suite struct BackoffTests {
    @Test func everyWaitLiesUnderADoublingCappedCeiling() async {
        await propertyCheck(count: 2000, input: Gen.double(in: 0...5), Gen.double(in: 0...60), Gen.int(in: 1...80), Gen.bool) { first, cap, retry, jittered in
            let backoff = Backoff(first: first, cap: cap, jitter: jittered ? .full : .none)
            let ceiling = backoff.ceiling(beforeRetry: retry)
            #expect(ceiling <= cap && ceiling >= 0)
            #expect(ceiling == min(cap, first * pow(2, Double(min(retry - 1, 30)))))
            #expect(backoff.ceiling(beforeRetry: retry + 1) >= ceiling)
            let delay = backoff.delay(beforeRetry: retry)
            if jittered { #expect(delay >= 0 && delay <= ceiling) } else { #expect(delay == ceiling) }
        }
    }

    /// Configured delays come from files and registrations: no value of them makes a wait trap or go non-finite.
    @Test func anyConfiguredValueGivesAFiniteWait() {
        let values: [Double] = [.nan, .infinity, -.infinity, -1, 0, 1e-300, 1, 1e300, .greatestFiniteMagnitude]
        for first in values {
            for cap in values {
                for jitter in [Backoff.Jitter.full, .none] {
                    let delay = Backoff(first: first, cap: cap, jitter: jitter).delay(beforeRetry: 31)
                    #expect(delay.isFinite && delay >= 0, "first \(first), cap \(cap), \(jitter): \(delay)")
                }
            }
        }
    }

    /// Full jitter spreads: of 2,000 waits under a 1 s ceiling, some fall in each tenth.
    @Test func fullJitterSpreadsOverTheWholeRange() {
        let backoff = Backoff(first: 1, cap: 1)
        var tenths = Set<Int>()
        for _ in 0..<2000 { tenths.insert(min(9, Int(backoff.delay(beforeRetry: 1) * 10))) }
        #expect(tenths.count == 10)
    }

    @Test func untilSuccessRetriesEachFailureAndReturnsTheResult() async {
        var seen: [Int] = []
        var calls = 0
        let result = await Backoff(first: 0.001, cap: 0.002).untilSuccess(failed: { _, retry in seen.append(retry) }) { () async throws -> String in
            calls += 1
            if calls < 4 { throw FerryError(.connectionError, "not yet") }
            return "done"
        }
        #expect(result == "done")
        #expect(seen == [1, 2, 3])
    }

    @Test func untilSuccessEndsWithNilWhenCancelled() async {
        let task = Task { await Backoff(first: 10, cap: 10).untilSuccess(failed: { _, _ in }) { () async throws -> Int in throw FerryError(.connectionError, "down") } }
        try? await Task.sleep(for: .milliseconds(50))
        task.cancel()
        #expect(await task.value == nil)
    }

    /// No retry loop in Sources doubles a delay of its own.
    @Test func noOtherLoopDoublesADelay() throws {
        let sources = TestPaths.repositoryRoot.appendingPathComponent("Sources")
        let files = FileManager.default.enumerator(atPath: sources.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        var found: [String] = []
        for file in files where !file.hasSuffix("FerryConcurrency/Backoff.swift") {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            for (number, line) in text.split(separator: "\n").enumerated()
            where line.contains("delay * 2") || line.contains("Delay * 2") || (line.contains("Task.sleep") && line.contains("1 << ")) {
                found.append("\(file):\(number + 1)")
            }
        }
        #expect(found.isEmpty, "backoff of its own (use a Backoff configuration): \(found)")
    }
}
