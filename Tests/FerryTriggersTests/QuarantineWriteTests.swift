import Foundation
import Testing

import FerryCore
import FerryTriggerKit
@testable import FerryTriggers

/// A revocation waits (bounded) for a `WorkerCrashed` record under way, so
/// that the record's offset is in the commit the revocation sends.
@Suite struct QuarantineWriteTests {
    @Test func aRevocationWaitsForTheWriteAndItsOffsetIsMarkedFirst() async throws {
        let write = QuarantineWrite()
        #expect(write.begin(through: 7))
        let marked = Marks()
        let settler = Thread {
            Thread.sleep(forTimeInterval: 0.3)
            // Earlier messages of the write do not end it.
            #expect(!write.settled(6) { marked.add(6) })
            #expect(write.settled(7) { marked.add(7) })
        }
        settler.start()
        let started = Date()
        #expect(write.revoke(waitingUntil: started.addingTimeInterval(10)), "the revocation saw the write end")
        let waited = Date().timeIntervalSince(started)
        #expect(waited >= 0.25 && waited < 5, "waited \(waited) s")
        #expect(marked.all == [7], "the last offset was marked before the revocation went on")
        #expect(!write.begin(through: 8), "no write begins once the partition is leaving")
    }

    @Test func aRevocationGivesUpAtItsDeadlineAndALateWriteMarksNothing() {
        let write = QuarantineWrite()
        #expect(write.begin(through: 3))
        let started = Date()
        #expect(!write.revoke(waitingUntil: started.addingTimeInterval(0.2)), "gave up")
        #expect(Date().timeIntervalSince(started) >= 0.15)
        let marked = Marks()
        // The partition's offsets are taken: a mark now would outlive it.
        #expect(write.settled(3) { marked.add(3) })
        #expect(marked.all.isEmpty)
    }

    @Test func withoutAWriteARevocationDoesNotWait() {
        let write = QuarantineWrite()
        let started = Date()
        #expect(write.revoke(waitingUntil: started.addingTimeInterval(10)))
        #expect(Date().timeIntervalSince(started) < 1)
        #expect(!write.settled(0) {})
    }

    @Test func aWriteGivenBackEndsWithoutWaitingForTheDeadline() {
        let write = QuarantineWrite()
        #expect(write.begin(through: 12))
        // `skipped` settles with nothing to mark.
        #expect(write.settled(12) {})
        let started = Date()
        #expect(write.revoke(waitingUntil: started.addingTimeInterval(10)))
        #expect(Date().timeIntervalSince(started) < 1)
    }
}

private final class Marks: @unchecked Sendable {
    private let lock = NSLock()
    private var offsets: [Int64] = []
    func add(_ offset: Int64) { lock.withLock { offsets.append(offset) } }
    var all: [Int64] { lock.withLock { offsets } }
}
