import FerryCore
import FerryEngine
import FerryTestSupport
import Foundation
import Testing
@testable import FerryWorker

/// The control book remembers decisions for transfers not yet reached, within
/// bounds: past the retention they go, and it never holds more than its
/// capacity, however many ids the topic names.
@Suite struct ControlBookTests {
    /// Decisions past the retention are dropped as new ones come in: the book
    /// follows the decisions of the last retention window, not every one ever sent.
    @Test func decisionsPastTheRetentionArePruned() {
        let book = ControlBook(retention: 60)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        var most = 0
        // Ten decisions a second for an hour: at most 600 are in force at once.
        for i in 0..<36_000 {
            let at = start.addingTimeInterval(Double(i) / 10)
            book.record(ControlMessage(id: "t-\(i)", action: .pause), at: at, now: at)
            most = max(most, book.count)
        }
        #expect(most <= 2 * ControlBook.firstPrune + 600, "the book held \(most) decisions")
        #expect(book.evicted == 0)
        let end = start.addingTimeInterval(3600)
        #expect(book.decision(for: "t-35999", now: end)?.action == .pause)
        #expect(book.decision(for: "t-0", now: end) == nil)
    }

    /// More decisions in force than the capacity: the oldest go (counted), the
    /// newest stay, and a transfer attached here still gets every decision.
    @Test func theBookHoldsAtMostItsCapacity() {
        let book = ControlBook(retention: 86_400, capacity: 1000)
        let now = Date()
        let control = TransferControl()
        book.attach("attached-1", control, now: now)
        var most = 0
        for i in 0..<20_000 {
            let at = now.addingTimeInterval(Double(i) / 1000)
            book.record(ControlMessage(id: "flood-\(i)", action: .cancel), at: at, now: at)
            most = max(most, book.count)
        }
        #expect(most <= 1000, "the book held \(most) decisions")
        #expect(book.evicted == 20_000 - book.count)
        #expect(book.decision(for: "flood-19999", now: now)?.action == .cancel)
        #expect(book.decision(for: "flood-0", now: now) == nil)
        #expect(book.record(ControlMessage(id: "attached-1", action: .pause), at: now.addingTimeInterval(30), now: now) == .paused)
    }

    /// A decision's time is its producer's (Kafka's CreateTime). One dated a
    /// year ahead counts from when it was read: it expires with the retention
    /// like any other, instead of staying in force (and in the book) for a year.
    @Test func aDecisionFromTheFutureExpiresLikeAnyOther() {
        let book = ControlBook(retention: 60)
        let now = Date()
        book.record(ControlMessage(id: "ahead", action: .pause), at: now.addingTimeInterval(365 * 86_400), now: now)
        #expect(book.decision(for: "ahead", now: now.addingTimeInterval(30))?.action == .pause)
        #expect(book.decision(for: "ahead", now: now.addingTimeInterval(61)) == nil)
        // A resume read later still wins over it.
        book.record(ControlMessage(id: "ahead", action: .resume), at: now.addingTimeInterval(10), now: now.addingTimeInterval(10))
        #expect(book.decision(for: "ahead", now: now.addingTimeInterval(20))?.action == .resume)
    }
}
