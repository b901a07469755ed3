import FerryCore
import Foundation
import GRDB

/// What Ferry last announced about each object (SQLite, `catalog.sqlite` in
/// a state directory): the images of `objects` stream records for writes that
/// did not go through a worker (a notification's old image, a reconciler's
/// comparison), the notifications already handled (a store repeats them), and
/// checkpoints. Bounded by the objects it describes; read in key order, page
/// by page, so a reconciliation of a million keys holds one page in memory.
public final class ObjectCatalog: Sendable {
    public struct Entry: Sendable, Hashable, Codable {
        public var bucket: String
        public var key: String
        public var size: Int64?
        public var eTag: String?
        public var contentType: String?
        public var owner: String?
        public var accessLevel: String?
        public var metadata: [String: String]
        public var lastModified: String?

        public init(bucket: String, key: String, size: Int64?, eTag: String?, contentType: String? = nil, owner: String? = nil,
                    accessLevel: String? = nil, metadata: [String: String] = [:], lastModified: String? = nil) {
            self.bucket = bucket; self.key = key; self.size = size; self.eTag = eTag; self.contentType = contentType
            self.owner = owner; self.accessLevel = accessLevel; self.metadata = metadata; self.lastModified = lastModified
        }
    }

    let database: DatabasePool
    public let path: String

    public init(directory: URL) throws {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-catalog") { db in
            try db.create(table: "catalog_object") { t in
                t.column("bucket", .text).notNull()
                t.column("key", .text).notNull()
                t.column("entry", .blob).notNull()
                t.primaryKey(["bucket", "key"])
            }
            try db.create(table: "catalog_sighting") { t in
                t.primaryKey("id", .text)
                t.column("seenAt", .double).notNull().indexed()
            }
            try db.create(table: "catalog_value") { t in
                t.primaryKey("name", .text)
                t.column("value", .text).notNull()
            }
        }
        (database, path) = try StateDatabase.open("catalog.sqlite", in: directory) { try migrator.migrate($0) }
    }

    public func entry(bucket: String, key: String) async throws -> Entry? {
        try await database.read { db in
            try Data.fetchOne(db.cachedStatement(sql: "SELECT entry FROM catalog_object WHERE bucket = ? AND key = ?"), arguments: [bucket, key])
                .flatMap { try? JSONDecoder().decode(Entry.self, from: $0) }
        }
    }

    public func upsert(_ entries: [Entry]) async throws {
        guard !entries.isEmpty else { return }
        let encoded = try entries.map { ($0.bucket, $0.key, Data(try FerryJSON.encode($0))) }
        try await database.write { db in
            for (bucket, key, data) in encoded {
                try db.cachedStatement(sql: "INSERT OR REPLACE INTO catalog_object (bucket, key, entry) VALUES (?, ?, ?)")
                    .execute(arguments: [bucket, key, data])
            }
        }
    }

    public func remove(_ objects: [(bucket: String, key: String)]) async throws {
        guard !objects.isEmpty else { return }
        try await database.write { db in
            for (bucket, key) in objects {
                try db.cachedStatement(sql: "DELETE FROM catalog_object WHERE bucket = ? AND key = ?").execute(arguments: [bucket, key])
            }
        }
    }

    /// Entries of `bucket` whose key starts with `prefix`, in key order (by
    /// bytes, as ListObjectsV2 orders them), after `after`, at most `limit`.
    public func page(bucket: String, prefix: String, after: String?, limit: Int) async throws -> [Entry] {
        try await database.read { db in
            // Keys are compared as BLOBs: byte order, as S3 lists them.
            let rows = try Data.fetchAll(db.cachedStatement(sql: """
                SELECT entry FROM catalog_object
                WHERE bucket = ? AND CAST(key AS BLOB) >= CAST(? AS BLOB) AND (? IS NULL OR CAST(key AS BLOB) > CAST(? AS BLOB))
                  AND substr(key, 1, length(?)) = ?
                ORDER BY CAST(key AS BLOB) LIMIT ?
                """), arguments: [bucket, prefix, after, after, prefix, prefix, limit])
            return rows.compactMap { try? JSONDecoder().decode(Entry.self, from: $0) }
        }
    }

    public func count(bucket: String) async throws -> Int {
        try await database.read { db in try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM catalog_object WHERE bucket = ?"),
            arguments: [bucket]) ?? 0 }
    }

    /// Whether a notification with this id was handled before.
    public func seen(_ id: String) async throws -> Bool {
        try await database.read { db in try Int.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM catalog_sighting WHERE id = ?"),
            arguments: [id]) != nil }
    }

    /// Records a notification's id; false when it was seen before (a store's repeat).
    public func firstSighting(_ id: String, at date: Date = Date()) async throws -> Bool {
        try await database.write { db in
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO catalog_sighting (id, seenAt) VALUES (?, ?)")
                .execute(arguments: [id, date.timeIntervalSince1970])
            return db.changesCount > 0
        }
    }

    /// Forgets sightings older than `date`.
    public func pruneSightings(before date: Date) async throws {
        try await database.write { db in
            try db.cachedStatement(sql: "DELETE FROM catalog_sighting WHERE seenAt < ?").execute(arguments: [date.timeIntervalSince1970])
        }
    }

    public func value(_ name: String) async throws -> String? {
        try await database.read { db in try String.fetchOne(db.cachedStatement(sql: "SELECT value FROM catalog_value WHERE name = ?"),
            arguments: [name]) }
    }

    public func setValue(_ value: String, for name: String) async throws {
        try await database.write { db in
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO catalog_value (name, value) VALUES (?, ?)").execute(arguments: [name, value])
        }
    }
}
