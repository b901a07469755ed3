import FerryCore
import FerryTestSupport
import Synchronization
import Testing

/// Invariant: every element is handled exactly once, and never more than
/// `limit` of them have a task at the same time (tasks are made as places free).
@Suite struct ConcurrentForEachTests {
    final class Counts: Sendable {
        let live = Atomic<Int>(0)
        let mostLive = Atomic<Int>(0)
        let seen = Mutex<[Int]>([])
    }

    @Test(arguments: [1, 7, 2024] as [UInt64])
    func neverMoreThanTheLimitAndEveryElementOnce(seed: UInt64) async {
        var rng = SeededGenerator(seed: seed)
        let count = Int.random(in: 0...600, using: &rng)
        let limit = Int.random(in: 1...40, using: &rng)
        let pauses = (0..<count).map { _ in Int.random(in: 0...3, using: &rng) }
        let counts = Counts()
        await forEachConcurrently(Array(zip(0..<count, pauses)), limit: limit) { element in
            let now = counts.live.add(1, ordering: .relaxed).newValue
            var most = counts.mostLive.load(ordering: .relaxed)
            while now > most {
                let (done, actual) = counts.mostLive.compareExchange(expected: most, desired: now, ordering: .relaxed)
                if done { break }
                most = actual
            }
            if element.1 > 0 { try? await Task.sleep(for: .milliseconds(element.1)) } else { await Task.yield() }
            counts.seen.withLock { $0.append(element.0) }
            counts.live.subtract(1, ordering: .relaxed)
        }
        #expect(counts.seen.withLock { $0.sorted() } == Array(0..<count), "seed \(seed)")
        #expect(counts.mostLive.load(ordering: .relaxed) <= limit, "seed \(seed): limit \(limit)")
        if count >= 4 * limit && limit > 1 {
            #expect(counts.mostLive.load(ordering: .relaxed) > 1, "seed \(seed): the elements ran one at a time")
        }
    }
}
