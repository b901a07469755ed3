import FerryCore
import FerryTriggers
import Foundation
import GRDB

/// Example stream trigger: keeps a queryable SQLite catalog of every object
/// (`<data root>/index/objects.sqlite`, table `objects`) from the `objects`
/// table's stream. Records may arrive twice or, across a crash, a stale one
/// after a newer one: a row is only replaced by a record with a higher
/// SequenceNumber, and removals leave a tombstone, so the catalog converges.
/// A record that cannot be written is reported in `batchItemFailures`, so
/// only it and those after it are retried.
///
///     sqlite3 ferry-data/index/objects.sqlite \
///       "SELECT key, size, owner FROM objects WHERE removed = 0 AND key LIKE 'public/%'"
public struct ObjectIndexHandler: StreamRecordHandler {
    public let database: DatabaseQueue

    public init(file: URL) throws {
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)  // several worker processes may share a data root
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

    public func handle(_ event: DynamoDBEvent, context: TriggerContext) async throws -> StreamBatchResponse {
        var failed: [String] = []
        for record in event.records {
            do {
                try await apply(record)
            } catch {
                context.logger.error("object index: record \(record.eventID) not written: \(error)")
                failed.append(record.eventID)
            }
        }
        return StreamBatchResponse(failedEventIDs: failed)
    }

    func apply(_ record: DynamoDBEvent.Record) async throws {
        let keys = record.dynamodb.keys
        guard let bucket = keys["bucket"]?.stringValue, let key = keys["key"]?.stringValue else {
            throw IndexError("record \(record.eventID) has no bucket/key keys")
        }
        let sequence = record.dynamodb.sequenceNumber
        let image = record.eventName == .remove ? nil : record.dynamodb.newImage
        try await database.write { db in
            if let stored = try String.fetchOne(db, sql: "SELECT sequenceNumber FROM objects WHERE bucket = ? AND key = ?",
                                                arguments: [bucket, key]),
               Self.compare(stored, sequence) >= 0 {
                return  // already as new or newer
            }
            let metadata: String? = image?["metadata"].flatMap { value -> String? in
                guard case .map(let map) = value else { return nil }
                let plain = map.compactMapValues(\.stringValue)
                return (try? JSONEncoder().encode(plain)).map { String(decoding: $0, as: UTF8.self) }
            }
            try db.execute(sql: """
                INSERT OR REPLACE INTO objects (bucket, key, size, eTag, contentType, owner, accessLevel, metadata, lastModified, removed, sequenceNumber)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [bucket, key, image?["size"]?.stringValue.flatMap { Int64($0) }, image?["eTag"]?.stringValue,
                                 image?["contentType"]?.stringValue, image?["owner"]?.stringValue, image?["accessLevel"]?.stringValue,
                                 metadata, image?["lastModified"]?.stringValue, image == nil ? 1 : 0, sequence])
        }
    }

    /// Compares two sequence numbers as the integers they are.
    static func compare(_ a: String, _ b: String) -> Int {
        if a.count != b.count { return a.count < b.count ? -1 : 1 }
        return a == b ? 0 : (a < b ? -1 : 1)
    }

    struct IndexError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
