import Foundation
import Synchronization

/// Tells when an outcome written to the outbox has reached Kafka, without
/// tracking rows: the drainer numbers its rounds, and a round *settles* when
/// it read everything the outbox held (fewer rows than its batch limit) and
/// every row it read was delivered (or parked for good). An outcome written
/// before round `n` started is therefore out once a round numbered `n` or
/// later has settled. The offset tracker holds a finished message back from
/// commits until then, so a worker that loses its state directory loses no
/// status whose request's offset was committed.
final class OutboxRounds: Sendable {
    private struct Counts {
        var started: Int64 = 0
        var settled: Int64 = 0
    }
    private let counts = Mutex(Counts())

    /// The round that must settle before an outcome already in the outbox is
    /// out: the next one to start (its read sees the outcome's committed row).
    func ticket() -> Int64 {
        counts.withLock { $0.started + 1 }
    }

    /// The drainer starts a round: call before it reads the outbox.
    func start() -> Int64 {
        counts.withLock { c in
            c.started += 1
            return c.started
        }
    }

    /// Round `round` delivered or parked everything the outbox held when it read it.
    func settle(_ round: Int64) {
        counts.withLock { $0.settled = max($0.settled, round) }
    }

    /// The latest round settled: every outcome holding a ticket up to it is out of the outbox.
    var settledThrough: Int64 {
        counts.withLock { $0.settled }
    }

    func isSettled(_ ticket: Int64) -> Bool {
        settledThrough >= ticket
    }

    /// Waits, blocking the calling thread, until `ticket` settles or `seconds`
    /// pass; true when it settled. For the rebalance callback, which runs on
    /// the consumer's own thread and must answer synchronously.
    func waitBlocking(for ticket: Int64, seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !isSettled(ticket) {
            guard Date() < deadline else { return false }
            usleep(10_000)
        }
        return true
    }
}
