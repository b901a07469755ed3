import FerryCore
import FerryTestSupport
import Synchronization
import Testing
import FerryConcurrency

/// Invariant: every element is handled exactly once, and never more than
/// `limit` of them have a task at the same time (tasks are made as places free).
@Suite struct ConcurrentForEachTests {
    final class Counts: Sendable {
        let live = Atomic<Int>(0)
        let mostLive = Atomic<Int>(0)
        let seen = Mutex<[Int]>([])

        /// A body starts: counted live, and the most live at once kept.
        func enter() {
            let now = live.add(1, ordering: .relaxed).newValue
            var most = mostLive.load(ordering: .relaxed)
            while now > most {
                let (done, actual) = mostLive.compareExchange(expected: most, desired: now, ordering: .relaxed)
                if done { break }
                most = actual
            }
        }

        /// A body ends, having handled `element`.
        func leave(_ element: Int) {
            seen.withLock { $0.append(element) }
            live.subtract(1, ordering: .relaxed)
        }
    }

    @Test(arguments: [1, 7, 2024] as [UInt64])
    func neverMoreThanTheLimitAndEveryElementOnce(seed: UInt64) async {
        var rng = SeededGenerator(seed: seed)
        let count = Int.random(in: 0...600, using: &rng)
        let limit = Int.random(in: 1...40, using: &rng)
        let pauses = (0..<count).map { _ in Int.random(in: 0...3, using: &rng) }
        let counts = Counts()
        await forEachConcurrently(Array(zip(0..<count, pauses)), limit: limit) { element in
            counts.enter()
            if element.1 > 0 { try? await Task.sleep(for: .milliseconds(element.1)) } else { await Task.yield() }
            counts.leave(element.0)
        }
        #expect(counts.seen.withLock { $0.sorted() } == Array(0..<count), "seed \(seed)")
        #expect(counts.mostLive.load(ordering: .relaxed) <= limit, "seed \(seed): limit \(limit)")
        if count >= 4 * limit && limit > 1 {
            #expect(counts.mostLive.load(ordering: .relaxed) > 1, "seed \(seed): the elements ran one at a time")
        }
    }

    /// Numbers 0..<count, handed out with a pause, then the end, or an error
    /// after `failAfter` of them (a listing that breaks off).
    struct Numbers: AsyncSequence, Sendable {
        struct BrokeOff: Error {}
        let count: Int
        let failAfter: Int?
        func makeAsyncIterator() -> Iterator { Iterator(count: count, failAfter: failAfter) }
        struct Iterator: AsyncIteratorProtocol, Sendable {
            let count: Int
            let failAfter: Int?
            var next = 0
            mutating func next() async throws(BrokeOff) -> Int? {
                if next == failAfter { throw BrokeOff() }
                guard next < count else { return nil }
                await Task.yield()
                defer { next += 1 }
                return next
            }
        }
    }

    /// Over an asynchronous sequence: the same invariant; and an error from the
    /// sequence is thrown only after every element handed out was handled, and
    /// nothing after it is started.
    @Test(arguments: [3, 11, 2024, 2025] as [UInt64])
    func overAnAsyncSequenceTheSameAndAnErrorAfterTheStartedOnes(seed: UInt64) async {
        var rng = SeededGenerator(seed: seed)
        let count = Int.random(in: 0...400, using: &rng)
        let limit = Int.random(in: 1...30, using: &rng)
        // Odd seeds break off (at any place, the first element and the end included).
        let failAfter: Int? = seed % 2 == 1 ? Int.random(in: 0...count, using: &rng) : nil
        let counts = Counts()
        var thrown = false
        do {
            try await forEachConcurrently(Numbers(count: count, failAfter: failAfter), limit: limit) { element in
                counts.enter()
                try? await Task.sleep(for: .milliseconds(element % 3))
                counts.leave(element)
            }
        } catch {
            thrown = true
            #expect(counts.live.load(ordering: .relaxed) == 0, "seed \(seed): thrown while bodies still ran")
        }
        #expect(thrown == (failAfter != nil), "seed \(seed)")
        #expect(counts.seen.withLock { $0.sorted() } == Array(0..<(failAfter ?? count)), "seed \(seed)")
        #expect(counts.mostLive.load(ordering: .relaxed) <= limit, "seed \(seed): limit \(limit)")
    }
}
