import FerryCore
import FerryTriggerKit
import Foundation
import Synchronization

/// A lane's `WorkerCrashed` failure record being written, until its messages
/// are marked done (or given back). A revocation waits for it, bounded, before
/// it takes the lane's offsets: otherwise the record could land after the
/// revocation committed the offset before it, and the next owner, reading the
/// same start records, would write the same failure record again.
final class QuarantineWrite: @unchecked Sendable {
    // `writing` and `revoked` are guarded by `condition`; `through` is read
    // without it on every message a lane settles.
    private let condition = NSCondition()
    private var writing = false
    private var revoked = false
    /// The last offset of the messages being quarantined; -1 when none.
    private let through = Atomic<Int64>(-1)

    /// Begins the write for messages up to `last`; false when the partition
    /// already left (the next owner decides for them).
    func begin(through last: Int64) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !revoked else { return false }
        writing = true
        through.store(last, ordering: .releasing)
        return true
    }

    /// The lane settled the message at `offset`. When it is the last of a
    /// write's messages, the write ends, and `done` (which marks the offset
    /// for the commit) runs first unless the revocation stopped waiting: a
    /// mark after the revocation took the offsets would outlive the partition.
    /// False when `offset` ends no write (the caller marks as usual).
    func settled(_ offset: Int64, done: () -> Void) -> Bool {
        guard through.load(ordering: .acquiring) == offset else { return false }
        condition.lock()
        defer { condition.unlock() }
        guard writing, through.load(ordering: .relaxed) == offset else { return false }
        if !revoked { done() }
        through.store(-1, ordering: .relaxed)
        writing = false
        condition.broadcast()
        return true
    }

    /// Waits until `deadline` for a write under way to be settled, then
    /// refuses new ones. False when it gave up waiting.
    @discardableResult
    func revoke(waitingUntil deadline: Date) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while writing {
            if !condition.wait(until: deadline) { break }
        }
        revoked = true
        return !writing
    }
}
