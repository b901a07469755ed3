import CFerrySQLite
import FerryCore
import Foundation
import GRDB

/// The worker's SQLite state (WAL mode, one file in the state directory):
/// the set of finished transfer ids with their terminal status (a redelivered
/// request is answered from here instead of running again), the journal of
/// transfers in flight (Journal.swift) and the outbox of messages not yet
/// acknowledged by Kafka (Outbox.swift).
public final class WorkerStateStore: Sendable {
    let database: DatabasePool
    /// Writes on the transfer path share transactions (group commit).
    let writes: WriteBatcher
    private let outboxHighWater: OutboxHighWater
    public let path: String

    /// Opens (and creates or migrates) `<directory>/ferry.sqlite`.
    public init(directory: URL) throws {
        (database, path) = try StateDatabase.open("ferry.sqlite", in: directory) { try Self.migrator.migrate($0) }
        writes = WriteBatcher(database: database)
        outboxHighWater = try database.writeWithoutTransaction { db in
            let highWater = try OutboxHighWater(db)
            db.add(transactionObserver: highWater, extent: .databaseLifetime)
            return highWater
        }
    }

    /// The highest outbox `seq` committed so far, whichever write put it there.
    /// A read of the outbox that begins after this was read sees every row up
    /// to it that is still waiting (see `OutboxHighWater`).
    public var outboxCommittedSeq: Int64 { outboxHighWater.value }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-finished-transfers") { db in
            try db.create(table: "finished_transfer") { t in
                t.primaryKey("id", .text)
                t.column("state", .text).notNull()
                t.column("status", .blob).notNull()
                t.column("finishedAt", .double).notNull()
            }
        }
        migrator.registerMigration("v2-journal-outbox") { db in
            // Transfers accepted and not yet finished, with the message that carried them.
            try db.create(table: "journal_transfer") { t in
                t.primaryKey("id", .text)
                t.column("request", .blob).notNull()
                t.column("topic", .text).notNull()
                t.column("partition", .integer).notNull()
                t.column("offset", .integer).notNull()
                t.column("startedAt", .double).notNull()
            }
            // Every multipart upload this worker started or adopted; `endedAt` once completed or aborted.
            try db.create(table: "multipart_upload") { t in
                t.primaryKey("uploadId", .text)
                t.column("transferId", .text).notNull().indexed()
                t.column("bucket", .text).notNull()
                t.column("key", .text).notNull()
                t.column("createdAt", .double).notNull()
                t.column("endedAt", .double)
            }
            try db.create(table: "upload_part") { t in
                t.column("uploadId", .text).notNull()
                t.column("partNumber", .integer).notNull()
                t.column("eTag", .text).notNull()
                t.column("size", .integer).notNull()
                t.column("checksum", .text)
                t.column("checksumAlgorithm", .text)
                t.primaryKey(["uploadId", "partNumber"])
            }
            // Ranges of a download already written to its temp file, valid for one ETag and part size.
            try db.create(table: "download_part") { t in
                t.column("transferId", .text).notNull()
                t.column("eTag", .text).notNull()
                t.column("partSize", .integer).notNull()
                t.column("partNumber", .integer).notNull()
                t.primaryKey(["transferId", "partNumber"])
            }
            try db.create(table: "outbox") { t in
                t.autoIncrementedPrimaryKey("seq")
                t.column("topic", .text).notNull()
                t.column("key", .blob)
                t.column("value", .blob).notNull()
                t.column("headers", .blob)
                t.column("createdAt", .double).notNull()
            }
        }
        migrator.registerMigration("v3-stream-offset") { db in
            // The request offset a finished transfer's stream records were numbered
            // from, so the record of its expiry continues the sequence.
            try db.alter(table: "finished_transfer") { t in t.add(column: "streamOffset", .integer) }
        }
        migrator.registerMigration("v4-outbox-parked") { db in
            // Messages Kafka refused for good (e.g. larger than the broker takes): kept
            // for people to inspect, out of the way of the messages behind them.
            try db.create(table: "outbox_parked") { t in
                t.autoIncrementedPrimaryKey("seq")
                t.column("topic", .text).notNull()
                t.column("key", .blob)
                t.column("value", .blob).notNull()
                t.column("headers", .blob)
                t.column("createdAt", .double).notNull()
                t.column("parkedAt", .double).notNull()
                t.column("reason", .text).notNull()
            }
        }
        migrator.registerMigration("v5-delivery-starts") { db in
            // Messages started here without an outcome yet (the crash-loop breaker's local record).
            try db.create(table: "delivery_start") { t in
                t.column("topic", .text).notNull()
                t.column("partition", .integer).notNull()
                t.column("offset", .integer).notNull()
                t.column("starts", .integer).notNull()
                t.column("recordedAt", .double).notNull()
                t.primaryKey(["topic", "partition", "offset"])
            }
        }
        registerItemMigrations(&migrator)
        return migrator
    }

    /// The terminal status recorded for `id`, if the transfer already finished here.
    public func finishedStatus(id: String) async throws -> TransferStatus? {
        let data = try await database.read { db in
            try Data.fetchOne(db.cachedStatement(sql: "SELECT status FROM finished_transfer WHERE id = ?"), arguments: [id])
        }
        return try data.map { try JSONDecoder().decode(TransferStatus.self, from: $0) }
    }

    /// Records a terminal status. The first one recorded for an id stays.
    public func recordFinished(_ status: TransferStatus) async throws {
        precondition(status.state.isTerminal, "only terminal statuses are recorded")
        let data = Data(try FerryJSON.encode(status))
        try await writes.write { db in
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO finished_transfer (id, state, status, finishedAt) VALUES (?, ?, ?, ?)")
                .execute(arguments: [status.id, status.state.rawValue, data, Date().timeIntervalSince1970])
        }
    }

    /// Forgets finished ids older than `age` seconds; returns how many. For
    /// each forgotten id that has stream records, `expiry` may give a message
    /// (the `transfers` REMOVE record), queued in the outbox in the same transaction.
    @discardableResult
    public func pruneFinished(olderThan age: TimeInterval,
                              expiry: (@Sendable (TransferStatus, Int64) -> OutboxMessage?)? = nil) async throws -> Int {
        let cutoff = Date().timeIntervalSince1970 - age
        return try await database.write { db in
            if let expiry {
                let rows = try Row.fetchAll(db.cachedStatement(sql: "SELECT status, streamOffset FROM finished_transfer WHERE finishedAt < ? AND streamOffset IS NOT NULL"),
                    
                                            arguments: [cutoff])
                let messages = rows.compactMap { row -> OutboxMessage? in
                    guard let status = try? JSONDecoder().decode(TransferStatus.self, from: row["status"] as Data) else { return nil }
                    return expiry(status, row["streamOffset"])
                }
                try Self.enqueue(messages, in: db)
            }
            try db.cachedStatement(sql: "DELETE FROM finished_transfer WHERE finishedAt < ?").execute(arguments: [cutoff])
            return db.changesCount
        }
    }

    /// The SQLite library version linked into this binary.
    public static var sqliteVersion: String { String(cString: sqlite3_libversion()) }
}
