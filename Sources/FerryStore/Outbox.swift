import FerryCore
import Foundation
import GRDB

/// A Kafka message waiting in the outbox.
public struct OutboxMessage: Sendable, Hashable {
    public var topic: String
    public var key: [UInt8]?
    public var value: [UInt8]
    public var headers: [Header]

    public struct Header: Sendable, Hashable, Codable {
        public var name: String
        public var value: String
        public init(_ name: String, _ value: String) { self.name = name; self.value = value }
    }

    public init(topic: String, key: [UInt8]?, value: [UInt8], headers: [Header] = []) {
        self.topic = topic; self.key = key; self.value = value; self.headers = headers
    }
}

/// The outbox: statuses, events and dead letters are written here first, in
/// the same transaction that records a transfer's outcome, and drained to
/// Kafka afterwards, oldest `seq` first. A crash between the two loses
/// nothing: the outbox drains on restart. The worker commits a request's
/// offset once its rows have left (`outboxCommittedSeq` tells which rows that is).
extension WorkerStateStore {
    /// Records an outcome atomically: the messages to publish, the terminal
    /// status in the finished set (first one wins), the end of the transfer's
    /// journal entry and of the message's start record.
    public func commitOutcome(_ messages: [OutboxMessage], finished: TransferStatus? = nil,
                              endingTransfer id: String? = nil, streamOffset: Int64? = nil,
                              delivery: DeliveryPosition? = nil, items: [ItemVersion] = [],
                              releases: [ObjectReference] = [], releasedBy: (requestId: String, sequencer: String) = ("", "")) async throws {
        let finishedRow = try finished.map { status -> (String, String, Data) in
            precondition(status.state.isTerminal, "only terminal statuses are recorded")
            return (status.id, status.state.rawValue, Data(try FerryJSON.encode(status)))
        }
        try await writes.write { db in
            let now = Date().timeIntervalSince1970
            try Self.enqueue(messages, in: db)
            // A record table write lands in the view with the messages that publish it.
            for item in items { try ItemView.apply(item, in: db) }
            try Self.queueReleases(releases, requestId: releasedBy.requestId, sequencer: releasedBy.sequencer, in: db)
            if let (id, state, status) = finishedRow {
                try db.cachedStatement(sql: "INSERT OR IGNORE INTO finished_transfer (id, state, status, finishedAt, streamOffset) VALUES (?, ?, ?, ?, ?)")
                    .execute(arguments: [id, state, status, now, streamOffset])
            }
            // The message has an outcome: it no longer counts as started.
            if let delivery { try Self.clearStart(delivery, in: db) }
            if let id {
                try db.cachedStatement(sql: "DELETE FROM journal_transfer WHERE id = ?").execute(arguments: [id])
                try db.cachedStatement(sql: "DELETE FROM download_part WHERE transferId = ?").execute(arguments: [id])
            }
        }
    }

    /// Appends `messages` to the outbox inside the caller's transaction.
    static func enqueue(_ messages: [OutboxMessage], in db: Database) throws {
        let now = Date().timeIntervalSince1970
        for message in messages {
            let headers = message.headers.isEmpty ? nil : Data(try FerryJSON.encode(message.headers))
            try db.cachedStatement(sql: "INSERT INTO outbox (topic, key, value, headers, createdAt) VALUES (?, ?, ?, ?, ?)")
                .execute(arguments: [message.topic, message.key.map { Data($0) }, Data(message.value), headers, now])
        }
    }

    /// The oldest `limit` messages not yet acknowledged by Kafka, in the order
    /// they were written (ascending `seq`, which is commit order).
    public func pendingOutbox(limit: Int) async throws -> [(seq: Int64, message: OutboxMessage)] {
        try await database.read { db in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM outbox ORDER BY seq LIMIT ?"), arguments: [limit]).map { row in
                let headerData: Data? = row["headers"]
                let headers = try headerData.map { try JSONDecoder().decode([OutboxMessage.Header].self, from: $0) } ?? []
                let key: Data? = row["key"]
                return (row["seq"], OutboxMessage(topic: row["topic"], key: key.map { Array($0) },
                                                  value: Array(row["value"] as Data), headers: headers))
            }
        }
    }

    /// Forgets messages Kafka has acknowledged.
    public func removeFromOutbox(_ seqs: [Int64]) async throws {
        guard !seqs.isEmpty else { return }
        try await writes.write { db in
            for seq in seqs { try db.cachedStatement(sql: "DELETE FROM outbox WHERE seq = ?").execute(arguments: [seq]) }
        }
    }

    /// Replaces a message still waiting (a dead letter cut smaller after the broker refused its size).
    public func replaceInOutbox(seq: Int64, with message: OutboxMessage) async throws {
        let headers = message.headers.isEmpty ? nil : Data(try FerryJSON.encode(message.headers))
        try await writes.write { db in
            try db.cachedStatement(sql: "UPDATE outbox SET key = ?, value = ?, headers = ? WHERE seq = ?")
                .execute(arguments: [message.key.map { Data($0) }, Data(message.value), headers, seq])
        }
    }

    /// Moves a message Kafka refused for good out of the outbox into
    /// `outbox_parked`, with the reason, so it no longer holds up the others.
    public func parkOutboxMessage(seq: Int64, reason: String) async throws {
        try await writes.write { db in
            try db.cachedStatement(sql: """
                INSERT INTO outbox_parked (topic, key, value, headers, createdAt, parkedAt, reason)
                SELECT topic, key, value, headers, createdAt, ?, ? FROM outbox WHERE seq = ?
                """).execute(arguments: [Date().timeIntervalSince1970, reason, seq])
            try db.cachedStatement(sql: "DELETE FROM outbox WHERE seq = ?").execute(arguments: [seq])
        }
    }

    /// Messages parked because Kafka refused them for good.
    public func parkedOutboxCount() async throws -> Int {
        try await database.read { db in try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM outbox_parked")) ?? 0 }
    }

    /// Messages waiting to be published.
    public func outboxDepth() async throws -> Int {
        try await database.read { db in try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM outbox")) ?? 0 }
    }
}
