import FerryTriggerKit
import Foundation
import GRDB

/// Example stream trigger: keeps a queryable SQLite catalog of every object
/// (`<output directory>/index/objects.sqlite`, table `objects`) from the `objects`
/// table's stream. Records may arrive twice or, across a crash, a stale one
/// after a newer one: a row is only replaced by a record with a higher
/// SequenceNumber, and removals leave a tombstone, so the catalog converges.
/// A batch is one transaction; a record that cannot be written is reported in
/// `batchItemFailures`, so only it and those after it are retried. A record
/// no retry could write (no `bucket`/`key` keys: not an `objects` record) is
/// logged and skipped instead: retried, it would hold its partition for the
/// registration's ten retries.
///
///     sqlite3 ferry-data/index/objects.sqlite \
///       "SELECT key, size, owner FROM objects WHERE removed = 0 AND key LIKE 'public/%'"
public struct ObjectIndexHandler: StreamRecordHandler {
    public let database: DatabaseQueue

    public init(file: URL) throws {
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)  // several worker processes may share an output directory
        // WAL: a commit appends to one file (a rollback journal writes and syncs two).
        configuration.journalMode = .wal
        database = try DatabaseQueue(path: file.path, configuration: configuration)
        try database.write { db in
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS objects (
                    bucket TEXT NOT NULL, key TEXT NOT NULL,
                    size INTEGER, eTag TEXT, contentType TEXT, owner TEXT, accessLevel TEXT,
                    metadata TEXT, lastModified TEXT,
                    removed INTEGER NOT NULL DEFAULT 0,
                    sequenceNumber TEXT NOT NULL,
                    PRIMARY KEY (bucket, key))
                """)
        }
    }

    /// Writes the whole batch in one transaction (one commit, one sync, instead
    /// of one per record), each record in a savepoint of its own so that one
    /// that fails is reported alone and the others stay written.
    public func handle(_ event: DynamoDBEvent, context: TriggerContext) async throws -> StreamBatchResponse {
        let records = event.records
        let (failures, skipped) = try await database.write { db -> ([(String, String)], [(String, String)]) in
            var failures: [(String, String)] = [], skipped: [(String, String)] = []
            for record in records {
                do {
                    try db.inSavepoint {
                        try Self.apply(record, in: db)
                        return .commit
                    }
                } catch let error as Unindexable {
                    skipped.append((record.eventID, error.description))
                } catch {
                    failures.append((record.eventID, "\(error)"))
                }
            }
            return (failures, skipped)
        }
        for (eventID, why) in skipped { context.logger.error("object index: record \(eventID) skipped: \(why)") }
        for (eventID, error) in failures { context.logger.error("object index: record \(eventID) not written: \(error)") }
        return StreamBatchResponse(failedEventIDs: failures.map(\.0))
    }

    static func apply(_ record: DynamoDBEvent.Record, in db: Database) throws {
        let keys = record.dynamodb.keys
        guard let bucket = keys["bucket"]?.stringValue, let key = keys["key"]?.stringValue else {
            throw Unindexable(description: "it has no bucket/key keys: not an objects record")
        }
        let sequence = record.dynamodb.sequenceNumber
        let image = record.eventName == .remove ? nil : record.dynamodb.newImage
        // Statements from the connection's cache: parsed once, not once per record.
        if let stored = try String.fetchOne(db.cachedStatement(sql: "SELECT sequenceNumber FROM objects WHERE bucket = ? AND key = ?"),
                                            arguments: [bucket, key]),
           compare(stored, sequence) >= 0 {
            return  // already as new or newer
        }
        let metadata: String? = image?["metadata"].flatMap { value -> String? in
            guard case .map(let map) = value else { return nil }
            let plain = map.compactMapValues(\.stringValue)
            return (try? FerryJSON.encodeSorted(plain)).map { String(decoding: $0, as: UTF8.self) }
        }
        try db.cachedStatement(sql: """
            INSERT OR REPLACE INTO objects (bucket, key, size, eTag, contentType, owner, accessLevel, metadata, lastModified, removed, sequenceNumber)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [bucket, key, image?["size"]?.stringValue.flatMap { Int64($0) }, image?["eTag"]?.stringValue,
                                     image?["contentType"]?.stringValue, image?["owner"]?.stringValue, image?["accessLevel"]?.stringValue,
                                     metadata, image?["lastModified"]?.stringValue, image == nil ? 1 : 0, sequence])
    }

    /// Compares two sequence numbers as the integers they are.
    static func compare(_ a: String, _ b: String) -> Int {
        if a.count != b.count { return a.count < b.count ? -1 : 1 }
        return a == b ? 0 : (a < b ? -1 : 1)
    }

    /// A record no retry could write.
    struct Unindexable: Error, CustomStringConvertible {
        var description: String
    }
}
