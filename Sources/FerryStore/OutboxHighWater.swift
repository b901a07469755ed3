import GRDB
import Synchronization

/// The highest outbox `seq` of any committed transaction, kept from the
/// writer's own notifications, so reading it costs no query.
///
/// Rows are numbered by AUTOINCREMENT under SQLite's single writer, so they
/// commit in `seq` order and a number is never reused: a read that begins
/// after this value was published sees every row up to it (or finds it
/// already deleted, i.e. delivered). GRDB reports an insert only once its
/// savepoints are released, and this observer counts it only when the
/// transaction commits, so a rolled-back write never raises the value.
final class OutboxHighWater: TransactionObserver, Sendable {
    private let committed: Atomic<Int64>
    /// The largest seq inserted by the transaction being written (writer's queue only).
    private let pending = Mutex<Int64?>(nil)

    init(_ db: Database) throws {
        let seq = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'outbox'") ?? 0
        committed = Atomic(seq)
    }

    var value: Int64 { committed.load(ordering: .acquiring) }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool {
        if case .insert(tableName: "outbox") = eventKind { return true }
        return false
    }

    func databaseDidChange(with event: DatabaseEvent) {
        pending.withLock { $0 = max($0 ?? 0, event.rowID) }
    }

    func databaseDidCommit(_ db: Database) {
        guard let seq = pending.withLock({ p -> Int64? in defer { p = nil }; return p }) else { return }
        // Only the writer stores, one transaction at a time: load-then-store cannot race.
        committed.store(max(committed.load(ordering: .relaxed), seq), ordering: .releasing)
    }

    func databaseDidRollback(_ db: Database) {
        pending.withLock { $0 = nil }
    }
}
