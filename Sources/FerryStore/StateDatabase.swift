import FerryCore
import Foundation
import GRDB

/// Opens a SQLite database of Ferry's (WAL, via GRDB's pool) in `directory`,
/// creating the directory; writers from other processes are waited for up to 5 s.
enum StateDatabase {
    /// Opens `name` and runs `prepare` (its migrations) on it. A file that is
    /// not a database or is damaged, or that cannot be opened at all, is refused
    /// with its path and what an operator can do: SQLite's own words
    /// ("file is not a database - while executing `SELECT * FROM sqlite_master`")
    /// name neither.
    static func open(_ name: String, in directory: URL,
                     prepare: (DatabasePool) throws -> Void = { _ in }) throws -> (pool: DatabasePool, path: String) {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent(name).path
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        do {
            let pool = try DatabasePool(path: path, configuration: configuration)
            try prepare(pool)
            return (pool, path)
        } catch let error as DatabaseError {
            let words = error.message ?? "SQLite error \(error.resultCode.rawValue)"
            guard [.SQLITE_NOTADB, .SQLITE_CORRUPT].contains(error.resultCode) else {
                throw FerryError(.localIOError, "cannot open state database \(path): \(words)")
            }
            throw FerryError(.localIOError, "state database \(path) is damaged (\(words)): "
                + "restore it from a copy, or move it and its -wal and -shm files aside to start with empty state "
                + "(what it recorded is then forgotten: requests whose offsets were not committed are consumed again)")
        }
    }
}
