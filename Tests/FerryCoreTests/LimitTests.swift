import FerryCore
import Synchronization
import Testing
import FerryConcurrency

/// Tracks how many holders there are at once, and the most seen.
final class Peak: Sendable {
    private let state = Mutex((now: Int64(0), max: Int64(0)))
    func enter(_ n: Int64 = 1) { state.withLock { $0.now += n; $0.max = Swift.max($0.max, $0.now) } }
    func leave(_ n: Int64 = 1) { state.withLock { $0.now -= n } }
    var max: Int64 { state.withLock { $0.max } }
}

@Suite struct LimitTests {
    @Test func semaphoreNeverExceedsItsLimit() async {
        let slots = AsyncSemaphore(limit: 3)
        let peak = Peak()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    await slots.acquire()
                    peak.enter()
                    try? await Task.sleep(for: .milliseconds(5))
                    peak.leave()
                    slots.release()
                }
            }
        }
        #expect(peak.max == 3)
        #expect(slots.inUse == 0)
    }

    @Test func byteBudgetHoldsAtMostItsCapacity() async {
        let budget = ByteBudget(capacity: 100)
        let peak = Peak()
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<30 {
                group.addTask {
                    let amount = await budget.reserve(Int64(10 + (i % 5) * 10))
                    peak.enter(amount)
                    try? await Task.sleep(for: .milliseconds(3))
                    peak.leave(amount)
                    budget.release(amount)
                }
            }
        }
        #expect(peak.max <= 100)
        #expect(budget.inUse == 0)
    }

    @Test func anOversizedReservationRunsAlone() async {
        let budget = ByteBudget(capacity: 10)
        let amount = await budget.reserve(1_000)
        #expect(amount == 10)
        #expect(budget.inUse == 10)
        budget.release(amount)
        #expect(budget.inUse == 0)
    }
}
