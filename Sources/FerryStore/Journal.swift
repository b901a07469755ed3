import Foundation
import GRDB

/// A transfer in flight, as the journal keeps it.
public struct JournaledTransfer: Sendable, Hashable {
    public var id: String
    /// The request message's bytes, as received.
    public var request: [UInt8]
    public var topic: String
    public var partition: Int32
    public var offset: Int64
    public var startedAt: Date
}

/// A multipart upload this worker started or adopted, with the parts it knows are stored.
public struct JournaledUpload: Sendable, Hashable {
    public var uploadId: String
    public var transferId: String
    public var bucket: String
    public var key: String
    public var createdAt: Date
    public var parts: [Part]

    public struct Part: Sendable, Hashable {
        public var partNumber: Int
        public var eTag: String
        public var size: Int64
        public var checksum: String?
        public var checksumAlgorithm: String?
        public init(partNumber: Int, eTag: String, size: Int64, checksum: String?, checksumAlgorithm: String?) {
            self.partNumber = partNumber; self.eTag = eTag; self.size = size
            self.checksum = checksum; self.checksumAlgorithm = checksumAlgorithm
        }
    }
}

/// The journal: what a transfer has done so far, so that after a crash it
/// resumes instead of starting over. Writes go through the group commit
/// (`WriteBatcher`); losing the last one only costs a re-check against S3.
extension WorkerStateStore {
    public func beginTransfer(id: String, request: [UInt8], topic: String, partition: Int32, offset: Int64,
                              outbox messages: [OutboxMessage] = []) async throws {
        try await writes.write { db in
            try Self.enqueue(messages, in: db)
            try db.cachedStatement(sql: """
                INSERT INTO journal_transfer (id, request, topic, partition, offset, startedAt) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET topic = excluded.topic, partition = excluded.partition, offset = excluded.offset
                """).execute(arguments: [id, Data(request), topic, partition, offset, Date().timeIntervalSince1970])
        }
    }

    /// Transfers accepted and not finished (after a crash: the ones that will resume).
    public func transfersInFlight() async throws -> [JournaledTransfer] {
        try await database.read { db in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM journal_transfer ORDER BY startedAt")).map { row in
                JournaledTransfer(id: row["id"], request: Array(row["request"] as Data), topic: row["topic"],
                                  partition: row["partition"], offset: row["offset"],
                                  startedAt: Date(timeIntervalSince1970: row["startedAt"]))
            }
        }
    }

    public func uploadStarted(transferId: String, bucket: String, key: String, uploadId: String) async throws {
        try await writes.write { db in
            try db.cachedStatement(sql: """
                INSERT OR IGNORE INTO multipart_upload (uploadId, transferId, bucket, key, createdAt) VALUES (?, ?, ?, ?, ?)
                """).execute(arguments: [uploadId, transferId, bucket, key, Date().timeIntervalSince1970])
        }
    }

    public func partUploaded(uploadId: String, part: JournaledUpload.Part) async throws {
        try await writes.write { db in
            try db.cachedStatement(sql: """
                INSERT OR REPLACE INTO upload_part (uploadId, partNumber, eTag, size, checksum, checksumAlgorithm)
                VALUES (?, ?, ?, ?, ?, ?)
                """).execute(arguments: [uploadId, part.partNumber, part.eTag, part.size, part.checksum, part.checksumAlgorithm])
        }
    }

    /// Marks an upload completed or aborted; its parts are forgotten.
    public func uploadEnded(uploadId: String) async throws {
        try await writes.write { db in
            try db.cachedStatement(sql: "UPDATE multipart_upload SET endedAt = ? WHERE uploadId = ?")
                .execute(arguments: [Date().timeIntervalSince1970, uploadId])
            try db.cachedStatement(sql: "DELETE FROM upload_part WHERE uploadId = ?").execute(arguments: [uploadId])
        }
    }

    /// The newest open upload of `transferId` to `bucket`/`key`, with its journaled parts.
    public func openUpload(transferId: String, bucket: String, key: String) async throws -> JournaledUpload? {
        try await database.read { db in
            guard let row = try Row.fetchOne(db.cachedStatement(sql: """
                SELECT * FROM multipart_upload WHERE transferId = ? AND bucket = ? AND key = ? AND endedAt IS NULL
                ORDER BY createdAt DESC LIMIT 1
                """), arguments: [transferId, bucket, key]) else { return nil }
            return try Self.upload(row, db)
        }
    }

    /// Open uploads created before `cutoff` (candidates for the sweeper).
    public func openUploads(createdBefore cutoff: Date) async throws -> [JournaledUpload] {
        try await database.read { db in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM multipart_upload WHERE endedAt IS NULL AND createdAt < ? ORDER BY createdAt"),
                             arguments: [cutoff.timeIntervalSince1970]).map { try Self.upload($0, db) }
        }
    }

    private static func upload(_ row: Row, _ db: Database) throws -> JournaledUpload {
        let uploadId: String = row["uploadId"]
        let parts = try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM upload_part WHERE uploadId = ? ORDER BY partNumber"),
                                     arguments: [uploadId]).map {
            JournaledUpload.Part(partNumber: $0["partNumber"], eTag: $0["eTag"], size: $0["size"],
                                 checksum: $0["checksum"], checksumAlgorithm: $0["checksumAlgorithm"])
        }
        return JournaledUpload(uploadId: uploadId, transferId: row["transferId"], bucket: row["bucket"], key: row["key"],
                               createdAt: Date(timeIntervalSince1970: row["createdAt"]), parts: parts)
    }

    /// Part numbers of a download already on disk, for this ETag and part size.
    public func downloadedParts(transferId: String, eTag: String, partSize: Int64) async throws -> Set<Int> {
        try await database.read { db in
            Set(try Int.fetchAll(db.cachedStatement(sql: "SELECT partNumber FROM download_part WHERE transferId = ? AND eTag = ? AND partSize = ?"),
                                 arguments: [transferId, eTag, partSize]))
        }
    }

    public func partDownloaded(transferId: String, eTag: String, partSize: Int64, partNumber: Int) async throws {
        try await writes.write { db in
            // Parts of an older ETag or part size no longer describe the file.
            try db.cachedStatement(sql: "DELETE FROM download_part WHERE transferId = ? AND (eTag != ? OR partSize != ?)")
                .execute(arguments: [transferId, eTag, partSize])
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO download_part (transferId, eTag, partSize, partNumber) VALUES (?, ?, ?, ?)")
                .execute(arguments: [transferId, eTag, partSize, partNumber])
        }
    }

    public func downloadEnded(transferId: String) async throws {
        try await writes.write { db in
            try db.cachedStatement(sql: "DELETE FROM download_part WHERE transferId = ?").execute(arguments: [transferId])
        }
    }
}
