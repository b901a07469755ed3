import FerryStore
import Foundation
import Synchronization

/// Tells when an outcome written to the outbox has reached Kafka, by outbox
/// `seq` (commit order). A finished request's *mark* is the highest seq
/// committed when it finished, which covers its own rows. The drainer reads
/// the oldest rows first; when Kafka took (or the drainer parked for good)
/// every row a round read, every row up to the last one read is out, and a
/// round that read less than a full batch also covers everything committed
/// before its read began. The offset tracker holds a finished message back
/// from commits until the watermark reaches its mark, so a worker that loses
/// its state directory loses no status whose request's offset was committed,
/// and a backlog in the outbox delays commits only by its own delivery.
final class OutboxWatermark: Sendable {
    private let committed: @Sendable () -> Int64
    private let settled = Atomic<Int64>(0)

    /// `committed` gives the highest outbox seq committed so far.
    init(committed: @escaping @Sendable () -> Int64) {
        self.committed = committed
    }

    convenience init(state: WorkerStateStore) {
        self.init(committed: { state.outboxCommittedSeq })
    }

    /// The seq that must be out before an outcome already committed is out.
    func mark() -> Int64 { committed() }

    /// A drain round delivered or parked every row it read: `count` rows, the
    /// oldest waiting, at most `limit`, the last numbered `last`; it read
    /// `committedBefore` from `mark()` before its read began.
    func roundDelivered(rows count: Int, last: Int64?, limit: Int, committedBefore: Int64) {
        guard let last else { return settle(through: committedBefore) }
        // A full batch may have left rows behind it; one that was not full read them all.
        settle(through: count < limit ? max(last, committedBefore) : last)
    }

    /// Every outbox row up to `seq` has been delivered or parked.
    func settle(through seq: Int64) {
        var current = settled.load(ordering: .relaxed)
        while seq > current {
            let (exchanged, original) = settled.compareExchange(expected: current, desired: seq, ordering: .releasing)
            if exchanged { return }
            current = original
        }
    }

    var settledThrough: Int64 { settled.load(ordering: .acquiring) }

    func isSettled(_ mark: Int64) -> Bool { settledThrough >= mark }

    /// Waits, blocking the calling thread, until `mark` settles or `seconds`
    /// pass; true when it settled. For the rebalance callback, which runs on
    /// the consumer's own thread and must answer synchronously.
    func waitBlocking(for mark: Int64, seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !isSettled(mark) {
            guard Date() < deadline else { return false }
            usleep(10_000)
        }
        return true
    }
}
