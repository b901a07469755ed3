import Foundation
import Synchronization
import Testing
@testable import FerryWorker

/// One key's turns run one at a time, in the order they were taken, however
/// the tasks holding them are scheduled; other keys' run side by side.
@Suite struct KeyedTurnsTests {
    @Test func turnsOfOneKeyRunAloneAndInOrder() async {
        let turns = KeyedTurns()
        let recorder = Recorder()
        // Taken in order (as the consumer loop takes them), awaited by tasks started in any order.
        let taken = (0..<300).map { i in (key: "k\(i % 5)", index: i, turn: turns.take("k\(i % 5)")) }
        await withTaskGroup(of: Void.self) { group in
            for entry in taken.shuffled() {
                group.addTask {
                    await entry.turn.wait()
                    recorder.enter(entry.key, entry.index)
                    await Task.yield()
                    recorder.leave(entry.key)
                    entry.turn.finish()
                }
            }
        }
        #expect(recorder.overlaps.load(ordering: .relaxed) == 0)
        for (key, order) in recorder.log.withLock({ $0 }) { #expect(order == order.sorted(), "\(key)") }
        #expect(turns.keysInUse == 0)
    }

    /// `mustWait` tells whether an earlier turn of the key is outstanding, before the wait.
    @Test func aTurnKnowsWhetherItMustWait() async {
        let turns = KeyedTurns()
        let first = turns.take("k"), second = turns.take("k"), other = turns.take("j")
        #expect(!first.mustWait && second.mustWait && !other.mustWait)
        await first.wait()
        #expect(!first.mustWait && second.mustWait, "the running head does not wait; the one behind it does")
        first.finish()
        #expect(!second.mustWait)
        await second.wait()
        second.finish()
        other.finish()
        #expect(turns.keysInUse == 0)
    }

    @Test func aTurnFinishedWithoutWaitingLetsTheNextGo() async {
        let turns = KeyedTurns()
        let first = turns.take("k"), second = turns.take("k"), third = turns.take("k")
        second.finish()  // abandoned before its wait (a revoked partition)
        await first.wait()
        first.finish()
        await third.wait()
        third.finish()
        third.finish()  // idempotent
        #expect(turns.keysInUse == 0)
    }
}

private final class Recorder: Sendable {
    let log = Mutex<[String: [Int]]>([:])
    let running = Mutex<[String: Int]>([:])
    let overlaps = Atomic<Int>(0)

    func enter(_ key: String, _ index: Int) {
        let inside = running.withLock { $0[key, default: 0] += 1; return $0[key]! }
        if inside > 1 { overlaps.add(1, ordering: .relaxed) }
        log.withLock { $0[key, default: []].append(index) }
    }

    func leave(_ key: String) { running.withLock { $0[key]! -= 1 } }
}
