import Foundation
import GRDB

/// A message's place in Kafka: the key of its start record.
public struct DeliveryPosition: Sendable, Hashable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
    public init(topic: String, partition: Int32, offset: Int64) {
        self.topic = topic; self.partition = partition; self.offset = offset
    }
}

/// Start records: how many times this worker started a message that has no
/// outcome yet. Written before the message runs, removed with its outcome, so
/// a record that survives a restart means the worker died while it ran.
extension WorkerStateStore {
    /// Records that `position` has now been started `starts` times.
    public func recordStart(_ position: DeliveryPosition, starts: Int) async throws {
        try await writes.write { db in
            try db.cachedStatement(sql: """
                INSERT INTO delivery_start (topic, partition, offset, starts, recordedAt) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (topic, partition, offset) DO UPDATE SET starts = excluded.starts, recordedAt = excluded.recordedAt
                """).execute(arguments: [position.topic, position.partition, position.offset, starts, Date().timeIntervalSince1970])
        }
    }

    /// Forgets the start record of a message given back without an outcome (not a crash).
    public func clearStart(_ position: DeliveryPosition) async throws {
        try await writes.write { db in
            try Self.clearStart(position, in: db)
        }
    }

    static func clearStart(_ position: DeliveryPosition, in db: Database) throws {
        try db.cachedStatement(sql: "DELETE FROM delivery_start WHERE topic = ? AND partition = ? AND offset = ?")
            .execute(arguments: [position.topic, position.partition, position.offset])
    }

    /// The start records of one partition at or past `offset`; older ones (their
    /// messages are committed) are deleted.
    public func startRecords(topic: String, partition: Int32, from offset: Int64) async throws -> [Int64: Int] {
        try await writes.write { db in
            try db.cachedStatement(sql: "DELETE FROM delivery_start WHERE topic = ? AND partition = ? AND offset < ?")
                .execute(arguments: [topic, partition, offset])
        }
        return try await database.read { db in
            var records: [Int64: Int] = [:]
            for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT offset, starts FROM delivery_start WHERE topic = ? AND partition = ?"),
                                        arguments: [topic, partition]) {
                records[row["offset"]] = row["starts"]
            }
            return records
        }
    }

    /// Forgets start records older than `age` seconds (partitions this worker never got back).
    public func pruneStarts(olderThan age: TimeInterval) async throws {
        let cutoff = Date().timeIntervalSince1970 - age
        try await writes.write { db in
            try db.cachedStatement(sql: "DELETE FROM delivery_start WHERE recordedAt < ?").execute(arguments: [cutoff])
        }
    }
}
