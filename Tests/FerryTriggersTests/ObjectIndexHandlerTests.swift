import FerryCore
import FerryTestSupport
import FerryTriggerKit
import FerryTriggers
import Foundation
import GRDB
import Testing
import Triggers

/// The shipped object index writes a batch in one transaction: a record that
/// cannot be written is reported alone, the rest of its batch is kept, a
/// record that is not an `objects` record is skipped, and a stale or repeated
/// record never replaces a newer row.
@Suite struct ObjectIndexHandlerTests {
    func record(_ key: String?, seq: Int, name: DynamoDBEvent.EventName = .insert, size: Int = 1) -> DynamoDBEvent.Record {
        var keys: AttributeMap = ["bucket": .string("b")]
        keys["key"] = key.map { .string($0) }
        var image = keys
        image["size"] = .number(size)
        return DynamoDBEvent.Record(
            eventID: "\(key ?? "none")#\(seq)", eventName: name, awsRegion: "us-east-1",
            eventSourceARN: "arn:aws:dynamodb:us-east-1:000000000000:table/objects/stream/ferry",
            dynamodb: StreamRecord(approximateCreationDateTime: 0, keys: keys, newImage: name == .remove ? nil : image,
                                   oldImage: nil, sequenceNumber: "1" + Digits.decimal(Int64(seq), width: 20) + "0000",
                                   streamViewType: .newAndOldImages))
    }

    @Test func aBatchIsWrittenWholeButTheRecordThatFails() async throws {
        let root = try TestPaths.temporaryDirectory("object-index")
        defer { try? FileManager.default.removeItem(at: root) }
        let handler = try ObjectIndexHandler(file: root.appendingPathComponent("objects.sqlite"))
        let context = TriggerContext.local(handlerName: "object-index", environment: TriggerEnvironment(dataRoot: root, outputDirectory: root, region: "us-east-1"))
        // A record SQLite refuses (as it would on a full disk): reported, so it is retried.
        try await handler.database.write { db in
            try db.execute(sql: "CREATE TRIGGER refuse BEFORE INSERT ON objects WHEN NEW.key = 'poison' BEGIN SELECT RAISE(ABORT, 'refused'); END")
        }
        let batch = [record("a", seq: 5, size: 10), record("poison", seq: 6), record("b", seq: 7, size: 20),
                     record("a", seq: 3, size: 99),  // older than the row it would replace
                     record(nil, seq: 10),  // no key: no retry could write it, so it is skipped, not retried
                     record("c", seq: 8), record("c", seq: 9, name: .remove)]
        let response = try await handler.handle(DynamoDBEvent(records: batch), context: context)
        #expect(response.batchItemFailures.map(\.itemIdentifier) == ["poison#6"])
        let rows = try await handler.database.read { db in
            try Row.fetchAll(db, sql: "SELECT key, size, removed FROM objects ORDER BY key").map {
                "\($0["key"] as String):\(($0["size"] as Int64?).map(String.init) ?? "-"):\($0["removed"] as Int)"
            }
        }
        #expect(rows == ["a:10:0", "b:20:0", "c:-:1"])
        let mode = try await handler.database.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(mode == "wal")
    }
}
