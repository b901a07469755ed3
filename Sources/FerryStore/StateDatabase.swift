import Foundation
import GRDB

/// Opens a SQLite database of Ferry's (WAL, via GRDB's pool) in `directory`,
/// creating the directory; writers from other processes are waited for up to 5 s.
enum StateDatabase {
    static func open(_ name: String, in directory: URL) throws -> (pool: DatabasePool, path: String) {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent(name).path
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        return (try DatabasePool(path: path, configuration: configuration), path)
    }
}
