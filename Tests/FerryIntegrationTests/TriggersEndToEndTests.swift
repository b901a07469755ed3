import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// The `objects` and `transfers` streams as a real worker publishes them, and
/// the shipped stream triggers consuming them: the object index (SQLite) and
/// the checksum manifest writer, cross-checked with boto3 against moto.
@Suite(.serialized) struct TriggersEndToEndTests {
    let logger = Logger(label: "test.triggers-e2e")

    func records(_ env: EndToEndTests.Environment) async throws -> [DynamoDBEvent.Record] {
        try await env.kcat.consumeAll(topic: "ferry.streams").compactMap {
            try? JSONDecoder().decode(DynamoDBEvent.Record.self, from: Data($0.value.utf8))
        }
    }

    @Test func streamsAndStreamTriggersFollowAnObjectsLife() async throws {
        let base = try TestPaths.temporaryDirectory("streams")
        let moto = try await MotoServer.start(logDirectory: base)
        defer { try? FileManager.default.removeItem(at: base) }
        let env = try EndToEndTests.Environment.oneBroker(base: base, server: moto, bucket: "trig", logger: logger)
        let dataRoot = env.dataRoot
        let boto3 = Boto3(moto)
        try await boto3("create-bucket", "trig")
        let worker = try env.startWorker(name: "streams-worker", stateDir: "streams-state")
        defer { Task { await worker.stop() } }

        func upload(_ id: String, _ text: String) async throws {
            let body = Data(text.utf8).base64EncodedString()
            try await env.kcat.produce(topic: "ferry.requests", key: "trig/incoming/a.txt", value: """
                {"id":"\(id)","op":"upload","bucket":"trig","key":"incoming/a.txt","identityId":"alice","source":"data:text/plain;base64,\(body)","metadata":{"colour":"blue"}}
                """)
            #expect(try await env.terminalStatus(of: id)?.state == .completed, "\(worker.log.suffix(3000))")
        }
        func manifest() async throws -> [String: Any]? {
            let out = base.appendingPathComponent("manifest.json")
            guard (try? await boto3("get", "trig", "public/manifests/a.txt.sha256.json", out.path)) != nil else { return nil }
            return try JSONSerialization.jsonObject(with: Data(contentsOf: out)) as? [String: Any]
        }

        // Create, then overwrite once the manifest of the first version exists.
        try await upload("life-1", "first")
        #expect(try await eventually(timeout: 90) { try await manifest()?["size"] as? Int == 5 }, "\(worker.log.suffix(3000))")
        try await upload("life-2", "second!!")
        #expect(try await eventually(timeout: 90) { try await manifest()?["size"] as? Int == 8 })
        // The manifest's digest is the one boto3 computes from the object.
        let digests = try JSONSerialization.jsonObject(with: Data(try await boto3("sha256-all", "trig", "public/incoming/").utf8)) as! [String: String]
        #expect(try await manifest()?["sha256"] as? String == digests["public/incoming/a.txt"])
        try await env.kcat.produce(topic: "ferry.requests", key: "trig/incoming/a.txt",
                                   value: #"{"id":"life-3","op":"delete","bucket":"trig","key":"incoming/a.txt","identityId":"alice"}"#)
        #expect(try await env.terminalStatus(of: "life-3")?.state == .completed)

        // The `objects` stream: INSERT, MODIFY (old image = the first version), REMOVE, in SequenceNumber order.
        var objects: [DynamoDBEvent.Record] = []
        _ = try await eventually(timeout: 90) {
            objects = try await records(env).filter { $0.tableName == "objects" && $0.dynamodb.keys["key"] == .string("public/incoming/a.txt") }
            return objects.count >= 3
        }
        #expect(objects.map(\.eventName) == [.insert, .modify, .remove])
        let sequences = objects.map(\.dynamodb.sequenceNumber)
        #expect(sequences.allSatisfy { (21...40).contains($0.count) })
        #expect(sequences == sequences.sorted() && Set(sequences).count == 3)
        let modify = objects[1].dynamodb
        #expect(modify.oldImage?["size"] == .number(5) && modify.newImage?["size"] == .number(8))
        #expect(modify.newImage?["owner"] == .string("alice") && modify.newImage?["accessLevel"] == .string("guest"))
        #expect(modify.oldImage?["owner"] == .string("alice"))
        #expect(modify.newImage?["metadata"] == .map(["colour": .string("blue")]))  // Ferry's own markers are not user metadata
        #expect(modify.newImage?["contentType"] == .string("text/plain"))
        #expect(objects[2].dynamodb.oldImage?["size"] == .number(8) && objects[2].dynamodb.newImage == nil)
        #expect(objects.allSatisfy { $0.eventSource == "aws:dynamodb" && $0.dynamodb.streamViewType == .newAndOldImages })

        // The `transfers` stream: INSERT on accept, MODIFY per state change, each carrying the previous state.
        let life1 = try await records(env).filter { $0.tableName == "transfers" && $0.dynamodb.keys["id"] == .string("life-1") }
        #expect(life1.map(\.eventName) == [.insert, .modify, .modify])
        #expect(life1.map { $0.dynamodb.newImage?["state"] } == [.string("accepted"), .string("running"), .string("completed")])
        #expect(life1.last?.dynamodb.oldImage?["state"] == .string("running"))
        #expect(life1.last?.dynamodb.newImage?["bytes"] == .number(5))

        // The object index converged on the removal (a tombstone with the REMOVE's sequence number).
        let index = env.triggerOutput.appendingPathComponent("index/objects.sqlite").path
        var row = ""
        _ = try await eventually(timeout: 90) {
            row = try await runChecked("python3", ["-c", """
                import sqlite3, sys
                r = sqlite3.connect(sys.argv[1]).execute("SELECT removed, sequenceNumber FROM objects WHERE key = 'public/incoming/a.txt'").fetchone()
                print(r and f"{r[0]} {r[1]}")
                """, index]).trimmingCharacters(in: .whitespacesAndNewlines)
            return row == "1 \(sequences[2])"
        }
        #expect(row == "1 \(sequences[2])", "\(worker.log.suffix(3000))")
        // The manifest itself (written outside the watched prefix) did not trigger another manifest.
        let listed = try JSONSerialization.jsonObject(with: Data(try await boto3("sha256-all", "trig", "public/manifests/").utf8)) as! [String: String]
        #expect(Array(listed.keys) == ["public/manifests/a.txt.sha256.json"])
    }
}
