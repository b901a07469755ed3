import CFerrySQLite
import FerryCore
import Foundation
import GRDB

/// The worker's SQLite state (WAL mode, one file in the state directory).
/// Today it holds the set of finished transfer ids with their terminal status,
/// so a redelivered request is answered from here instead of running again.
public final class WorkerStateStore: Sendable {
    private let database: DatabasePool
    public let path: String

    /// Opens (and creates or migrates) `<directory>/ferry.sqlite`.
    public init(directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent("ferry.sqlite").path
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        database = try DatabasePool(path: path, configuration: configuration)
        try Self.migrator.migrate(database)
    }

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
        return migrator
    }

    /// The terminal status recorded for `id`, if the transfer already finished here.
    public func finishedStatus(id: String) async throws -> TransferStatus? {
        let data = try await database.read { db in
            try Data.fetchOne(db, sql: "SELECT status FROM finished_transfer WHERE id = ?", arguments: [id])
        }
        return try data.map { try JSONDecoder().decode(TransferStatus.self, from: $0) }
    }

    /// Records a terminal status. The first one recorded for an id stays.
    public func recordFinished(_ status: TransferStatus) async throws {
        precondition(status.state.isTerminal, "only terminal statuses are recorded")
        let data = try JSONEncoder().encode(status)
        try await database.write { db in
            try db.execute(sql: "INSERT OR IGNORE INTO finished_transfer (id, state, status, finishedAt) VALUES (?, ?, ?, ?)",
                           arguments: [status.id, status.state.rawValue, data, Date().timeIntervalSince1970])
        }
    }

    /// Forgets finished ids older than `age` seconds; returns how many.
    @discardableResult
    public func pruneFinished(olderThan age: TimeInterval) async throws -> Int {
        let cutoff = Date().timeIntervalSince1970 - age
        return try await database.write { db in
            try db.execute(sql: "DELETE FROM finished_transfer WHERE finishedAt < ?", arguments: [cutoff])
            return db.changesCount
        }
    }

    /// The SQLite library version linked into this binary.
    public static var sqliteVersion: String { String(cString: sqlite3_libversion()) }
}
