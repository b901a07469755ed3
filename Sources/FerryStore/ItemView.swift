import FerryCore
import Foundation
import GRDB

/// The queryable view of record tables in SQLite: the highest version of
/// each item (deletions kept as versions, so a late, older write cannot bring
/// an item back and a re-created item continues its numbering), and how far
/// each table topic partition has been read. Lives in a worker's state
/// database: its own writes land in the same transaction as their outbox
/// messages. (Readers keep theirs in memory: `InMemoryItemView`.)
public enum ItemView {
    static func createSchema(_ db: Database) throws {
        try db.create(table: "item_view") { t in
            t.column("tableName", .text).notNull()
            t.column("itemKey", .text).notNull()
            t.column("partitionKey", .text).notNull()
            t.column("sortKey", .text)
            t.column("sortNumber", .double)
            t.column("version", .integer).notNull()
            t.column("record", .blob)
            t.primaryKey(["tableName", "itemKey"])
        }
        try db.create(index: "item_view_query", on: "item_view", columns: ["tableName", "partitionKey", "sortKey"])
        try db.create(table: "item_view_position") { t in
            t.column("topic", .text).notNull()
            t.column("partition", .integer).notNull()
            t.column("nextOffset", .integer).notNull()
            t.primaryKey(["topic", "partition"])
        }
    }

    /// Stores `change` when it is newer than what the view holds; true when it was.
    @discardableResult
    static func apply(_ change: ItemVersion, in db: Database) throws -> Bool {
        if let held = try Int64.fetchOne(db.cachedStatement(sql: "SELECT version FROM item_view WHERE tableName = ? AND itemKey = ?"),
                                         arguments: [change.table, change.itemKey]), held >= change.version {
            return false
        }
        var partitionKey = "", sortKey: String?, sortNumber: Double?, sortOrder: String?
        if let record = change.record {
            partitionKey = record.keys[record.keySchema.first ?? ""]?.stringValue ?? ""
            if record.keySchema.count > 1, let sort = record.keys[record.keySchema[1]] {
                sortKey = sort.stringValue
                if case .number(let n) = sort { sortNumber = Double(n); sortOrder = DynamoNumber.orderKey(n) }
            }
        }
        let blob = try change.record.map { Data(try FerryJSON.encode($0)) }
        try db.cachedStatement(sql: """
            INSERT INTO item_view (tableName, itemKey, partitionKey, sortKey, sortNumber, sortOrder, version, record)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (tableName, itemKey) DO UPDATE SET partitionKey = excluded.partitionKey, sortKey = excluded.sortKey,
              sortNumber = excluded.sortNumber, sortOrder = excluded.sortOrder, version = excluded.version, record = excluded.record
            """).execute(arguments: [change.table, change.itemKey, partitionKey, sortKey, sortNumber, sortOrder, change.version, blob])
        return true
    }

    /// The item and the version it is at (a deleted item: nil record, its tombstone's version).
    static func current(table: String, itemKey: String, in db: Database) throws -> (record: ItemRecord?, version: Int64)? {
        guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT version, record FROM item_view WHERE tableName = ? AND itemKey = ?"),
                                         arguments: [table, itemKey]) else { return nil }
        let blob: Data? = row["record"]
        return (try blob.map { try JSONDecoder().decode(ItemRecord.self, from: $0) }, row["version"])
    }

    /// Items of one partition key, in sort-key order, optionally limited to a
    /// sort-key prefix or an inclusive range (numbers compare as numbers).
    static func query(_ q: ItemQuery, in db: Database) throws -> [ItemRecord] {
        let (table, partitionKey, sortKeyPrefix, from, to, limit) = (q.table, q.partitionKey, q.sortKeyPrefix, q.from, q.to, q.limit)
        // A numeric partition key is held in its canonical form: "3.0" asks for the items of 3.
        let canonicalKey = ItemQuery.canonicalNumber(partitionKey) ?? partitionKey
        var sql = "SELECT record FROM item_view WHERE tableName = ? AND partitionKey IN (?, ?) AND record IS NOT NULL"
        var arguments: [any DatabaseValueConvertible] = [table, partitionKey, canonicalKey]
        if let prefix = sortKeyPrefix {
            // SQLite's substr counts code points (Swift's count, characters): so many scalars, compared as bytes.
            sql += " AND substr(sortKey, 1, ?) = ?"
            arguments += [prefix.unicodeScalars.count, prefix]
        }
        for (bound, op) in [(from, ">="), (to, "<=")] {
            guard let bound else { continue }
            if let order = DynamoNumber.orderKey(bound) {
                // Numbers compare exactly (`DynamoNumber.orderKey`), not as Doubles.
                sql += " AND (sortOrder \(op) ? OR (sortOrder IS NULL AND sortKey \(op) ?))"
                arguments += [order, bound]
            } else {
                sql += " AND sortKey \(op) ?"
                arguments.append(bound)
            }
        }
        sql += " ORDER BY sortOrder, sortKey LIMIT ?"
        arguments.append(limit)
        return try Data.fetchAll(db.cachedStatement(sql: sql), arguments: StatementArguments(arguments)).map {
            try JSONDecoder().decode(ItemRecord.self, from: $0)
        }
    }

    /// Changes read from a table topic, and where reading resumes, in one transaction.
    static func applyRead(_ changes: [ItemVersion], topic: String, partition: Int32, next: Int64, in db: Database) throws {
        for change in changes { try apply(change, in: db) }
        try setPosition(topic: topic, partition: partition, next: next, in: db)
    }

    static func position(topic: String, partition: Int32, in db: Database) throws -> Int64? {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT nextOffset FROM item_view_position WHERE topic = ? AND partition = ?"),
                           arguments: [topic, partition])
    }

    static func setPosition(topic: String, partition: Int32, next: Int64, in db: Database) throws {
        try db.cachedStatement(sql: """
            INSERT INTO item_view_position (topic, partition, nextOffset) VALUES (?, ?, ?)
            ON CONFLICT (topic, partition) DO UPDATE SET nextOffset = max(nextOffset, excluded.nextOffset)
            """).execute(arguments: [topic, partition, next])
    }
}

extension WorkerStateStore: ItemViewWriter {
    public func apply(_ changes: [ItemVersion], topic: String, partition: Int32, next: Int64) async throws {
        try await writes.write { db in try ItemView.applyRead(changes, topic: topic, partition: partition, next: next, in: db) }
    }

    public func position(topic: String, partition: Int32) async throws -> Int64? {
        try await database.read { db in try ItemView.position(topic: topic, partition: partition, in: db) }
    }

    /// The item as this worker knows it (its own writes at once, others' once read from the table topic).
    public func currentItem(table: String, itemKey: String) async throws -> (record: ItemRecord?, version: Int64)? {
        try await database.read { db in try ItemView.current(table: table, itemKey: itemKey, in: db) }
    }

    public func queryItems(_ query: ItemQuery) async throws -> [ItemRecord] {
        try await database.read { db in try ItemView.query(query, in: db) }
    }

    /// Files an item write let go (a replaced or deleted item's, a failed
    /// request's): deleted by the `FileReleaser` after the write is durable.
    public func pendingReleases(limit: Int) async throws -> [FileRelease] {
        try await database.read { db in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT id, bucket, key, transferId, requestId, sequencer FROM item_file_release ORDER BY id LIMIT ?"),
                
                             arguments: [limit]).map {
                FileRelease(id: $0["id"], object: ObjectReference(bucket: $0["bucket"], key: $0["key"], transferId: $0["transferId"]),
                            requestId: $0["requestId"], sequencer: $0["sequencer"])
            }
        }
    }

    /// Files waiting to be deleted.
    public func releaseBacklog() async throws -> Int {
        try await database.read { db in try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM item_file_release")) ?? 0 }
    }

    /// Ends a release: its messages (the removal's event and record) go to the outbox in the same transaction.
    public func completeRelease(id: Int64, messages: [OutboxMessage]) async throws {
        try await writes.write { db in
            try Self.enqueue(messages, in: db)
            try db.cachedStatement(sql: "DELETE FROM item_file_release WHERE id = ?").execute(arguments: [id])
        }
    }

    static func queueReleases(_ objects: [ObjectReference], requestId: String, sequencer: String, in db: Database) throws {
        for object in objects {
            try db.cachedStatement(sql: "INSERT INTO item_file_release (bucket, key, transferId, requestId, sequencer, createdAt) VALUES (?, ?, ?, ?, ?, ?)")
                .execute(arguments: [object.bucket, object.key, object.transferId, requestId, sequencer, Date().timeIntervalSince1970])
        }
    }

    static func registerItemMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v6-item-view") { db in
            try ItemView.createSchema(db)
            try db.create(table: "item_file_release") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("bucket", .text).notNull()
                t.column("key", .text).notNull()
                t.column("transferId", .text).notNull()
                t.column("requestId", .text).notNull()
                t.column("sequencer", .text).notNull()
                t.column("createdAt", .double).notNull()
            }
        }
        // Numeric sort keys in exact order: `sortNumber`, a Double, tied 19-digit keys
        // (nanosecond times, snowflake ids) and put ranges' ends in the wrong place.
        migrator.registerMigration("v7-item-sort-order") { db in
            try db.alter(table: "item_view") { t in t.add(column: "sortOrder", .text) }
            for row in try Row.fetchAll(db, sql: "SELECT tableName, itemKey, sortKey FROM item_view WHERE sortNumber IS NOT NULL") {
                let sortKey: String? = row["sortKey"]
                try db.execute(sql: "UPDATE item_view SET sortOrder = ? WHERE tableName = ? AND itemKey = ?",
                               arguments: [sortKey.flatMap(DynamoNumber.orderKey), row["tableName"] as String, row["itemKey"] as String])
            }
            try db.create(index: "item_view_order", on: "item_view", columns: ["tableName", "partitionKey", "sortOrder"])
        }
    }
}

/// A file an item write let go, to delete.
public struct FileRelease: Sendable, Hashable {
    public var id: Int64
    public var object: ObjectReference
    /// The request whose write let it go, and the sequencer its removal event carries.
    public var requestId: String
    public var sequencer: String
}
