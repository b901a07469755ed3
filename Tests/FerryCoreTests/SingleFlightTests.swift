import FerryCore
import FerryTestSupport
import Foundation
import Synchronization
import Testing
import FerryConcurrency

/// `SingleFlight` runs at most one piece of work at a time, and a call gets
/// the result of a run that was under way at some moment of the call: never
/// one already handed back before the call began, never a run of its own
/// beside another.
@Suite struct SingleFlightTests {
    /// What the runs and calls of a round did, on one clock.
    final class Trace: Sendable {
        struct Run { var start: ContinuousClock.Instant }
        let runs = Mutex<[Run]>([])
        let running = Atomic<Int>(0)
        let mostAtOnce = Atomic<Int>(0)

        func begin() -> Int {
            let now = running.add(1, ordering: .sequentiallyConsistent).newValue
            mostAtOnce.max(now, ordering: .sequentiallyConsistent)
            return runs.withLock { $0.append(Run(start: .now)); return $0.count - 1 }
        }

        func end() { running.subtract(1, ordering: .sequentiallyConsistent) }
    }

    /// 64 calls while a slow run is under way: one run, and every call has its result.
    @Test func callsDuringARunShareIt() async {
        let flight = SingleFlight<Int>()
        let runs = SharedCounter()
        let work: @Sendable () async -> Int = {
            runs.add()
            try? await Task.sleep(for: .milliseconds(300))
            return runs.value
        }
        let results = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<64 { group.addTask { await flight.run(work) } }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(results == Array(repeating: 1, count: 64) && runs.value == 1, "\(runs.value) runs")
        #expect(await flight.run(work) == 2, "a call after the run ended starts the next")
    }

    /// A caller cancelled while it waits leaves the run to the others: the work is not cancelled.
    @Test func aCancelledCallerDoesNotCancelTheSharedRun() async {
        let flight = SingleFlight<Bool>()
        let work: @Sendable () async -> Bool = {
            try? await Task.sleep(for: .milliseconds(200))
            return !Task.isCancelled
        }
        let other = Task { await flight.run(work) }
        try? await Task.sleep(for: .milliseconds(20))
        let cancelled = Task { await flight.run(work) }
        cancelled.cancel()
        #expect(await other.value, "the shared run was cancelled")
        #expect(await cancelled.value)
    }

    /// Generated rounds (seeded; `FERRY_FUZZ_SEED` replays them): calls start
    /// at drawn times, runs take drawn times. No two runs overlap; a call
    /// that began after another call had returned never gets that call's run
    /// (it was over), and no call gets a run that started after it returned.
    @Test func generatedCallsNeverOverlapRunsOrTakeAnEndedRun() async {
        let seed = FuzzReplay.seed
        print("SingleFlight: FERRY_FUZZ_SEED=\(seed)")
        var rng = SeededGenerator(seed: seed)
        for round in 0..<20 {
            let trace = Trace()
            let flight = SingleFlight<Int>()
            let calls = (0..<Int.random(in: 2...30, using: &rng)).map { _ in
                (delay: Int.random(in: 0...40, using: &rng), work: Int.random(in: 0...15, using: &rng))
            }
            let seen = await withTaskGroup(of: (ContinuousClock.Instant, Int, ContinuousClock.Instant).self) { group in
                for call in calls {
                    group.addTask {
                        try? await Task.sleep(for: .milliseconds(call.delay))
                        let began = ContinuousClock.now
                        let run = await flight.run {
                            let run = trace.begin()
                            try? await Task.sleep(for: .milliseconds(call.work))
                            trace.end()
                            return run
                        }
                        return (began, run, ContinuousClock.now)
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            let runs = trace.runs.withLock { $0 }
            #expect(trace.mostAtOnce.load(ordering: .sequentiallyConsistent) == 1, "round \(round): runs overlapped")
            #expect(runs.count <= calls.count)
            for (_, run, returned) in seen {
                #expect(runs[run].start <= returned, "round \(round): run \(run) started after its caller returned")
                for (otherBegan, otherRun, _) in seen where otherBegan > returned {
                    #expect(otherRun != run, "round \(round): a call that began after run \(run) was returned got it too")
                }
            }
        }
    }
}
