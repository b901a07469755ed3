import FerryClient
import FerryCore
import FerryKafka
import FerryS3
import FerryStorage
import FerryTestSupport
import Foundation
import Logging
import Testing

/// Records that carry files, through a real worker (mock cluster + moto): the
/// files are uploaded, the item written with their `S3Object`s, one stream
/// record per change, and the `post-feed` stream trigger runs for each;
/// replaced and deleted items' files are deleted (`posts:id:delete-files`);
/// a refused file writes nothing. Checked from outside: boto3 lists and
/// hashes the bucket, kcat reads the table, stream and DLQ topics.
@Suite(.serialized) struct ItemTests {
    let logger = Logger(label: "test.items")
    static let table = TableDefinition(name: "posts", partitionKey: "id", deletesUnreferencedFiles: true)

    struct Setup {
        var env: EndToEndTests.Environment
        var moto: MotoServer
        var base: URL
        var client: ItemClient
        var files: [String: String] = [:]  // local path → sha256

        /// A file of `size` seeded bytes under the data root; returns its path.
        mutating func file(_ name: String, size: Int, seed: UInt64) throws -> String {
            // Seeded bytes (SplitMix64), so a failing run can be reproduced.
            var state = seed
            let bytes = (0..<size).map { _ -> UInt8 in
                state &+= 0x9E37_79B9_7F4A_7C15
                var z = state
                z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                return UInt8(truncatingIfNeeded: z ^ (z >> 31))
            }
            let url = env.dataRoot.appendingPathComponent("items/\(name)")
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(bytes).write(to: url)
            files[url.path] = hex(Digest.sha256(bytes))
            return url.path
        }

        func fileInput(key: String, path: String) -> AttributeValue {
            .map(["bucket": .string("items"), "key": .string(key), "region": .string("us-east-1"), "localUri": .string(path),
                  "mimeType": .string("application/octet-stream")])
        }

        /// The table as its topic holds it: the latest record per item (tombstones remove).
        func tableContents() async throws -> [String: ItemRecord] {
            var items: [String: (Int64, ItemRecord?)] = [:]
            for message in try await env.kcat.consumeAll(topic: "ferry.tables.posts") {
                if message.value.isEmpty {
                    let version = message.headers.components(separatedBy: ",").first { $0.hasPrefix("\(ItemRecord.versionHeader)=") }
                        .flatMap { Int64($0.dropFirst(ItemRecord.versionHeader.count + 1)) } ?? Int64.max
                    if version > (items[message.key]?.0 ?? 0) { items[message.key] = (version, nil) }
                } else {
                    let record = try JSONDecoder().decode(ItemRecord.self, from: Data(message.value.utf8))
                    if record.version > (items[message.key]?.0 ?? 0) { items[message.key] = (record.version, record) }
                }
            }
            return items.compactMapValues { $0.1 }
        }

        /// Stored objects under the posts' prefix: key → sha256.
        func stored() async throws -> [String: String] {
            let out = try await runChecked("python3", [TestPaths.python.appendingPathComponent("s3_client.py").path, moto.endpoint,
                                                       "sha256-all", "items", "public/posts/"], environment: moto.clientEnvironment)
            return try JSONDecoder().decode([String: String].self, from: Data(out.utf8))
        }

        /// This table's stream records, from ferry.streams.
        func streamRecords() async throws -> [DynamoDBEvent.Record] {
            try await env.kcat.consumeAll(topic: "ferry.streams").compactMap {
                try? JSONDecoder().decode(DynamoDBEvent.Record.self, from: Data($0.value.utf8))
            }.filter { $0.tableName == "posts" }
        }

        func feed() -> [[String: Any]] {
            let text = (try? String(contentsOf: env.triggerOutput.appendingPathComponent("feed/posts.jsonl"), encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }

        func completed(_ ids: Set<String>, timeout: Double = 120) async throws -> Bool {
            try await eventually(timeout: timeout, every: 1) {
                Set(try await env.statuses().filter { $0.state.isTerminal }.map(\.id)).isSuperset(of: ids)
            }
        }
    }

    func withSetup(_ name: String, _ body: (inout Setup) async throws -> Void) async throws {
        let base = try TestPaths.temporaryDirectory(name)
        try await MotoServer.start(logDirectory: base).stopAfter { moto in
            let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
            for topic in Topics().all + [Topics().table("posts")] { try cluster.createTopic(topic, partitions: 4) }
            let dataRoot = base.appendingPathComponent("data")
            try FileManager.default.createDirectory(at: dataRoot, withIntermediateDirectories: true)
            let env = EndToEndTests.Environment(cluster: cluster, kcat: Kcat(bootstrapServers: cluster.bootstrapServers), dataRoot: dataRoot,
                                                logs: base, server: moto, bucket: "items")
            try await Boto3(moto)("create-bucket", "items")
            var setup = Setup(env: env, moto: moto, base: base, client: try ItemClient(bootstrapServers: cluster.bootstrapServers, logger: logger))
            try await body(&setup)
        }
        try? FileManager.default.removeItem(at: base)
    }

    func startWorker(_ setup: Setup, _ name: String) throws -> BackgroundProcess {
        try setup.env.startWorker(name: name, stateDir: "state", extra: ["--table", "posts:id:delete-files", "--role", "transfers,triggers"])
    }

    /// Every live item's files are stored byte for byte, and nothing else is stored under the posts' prefix.
    func expectFilesMatchItems(_ setup: Setup, _ items: [String: ItemRecord], sources: [String: String]) async throws {
        let stored = try await setup.stored()
        var referenced: [String: String] = [:]
        for record in items.values {
            for object in record.item.referencedObjects { referenced[object.key] = sources[object.key] }
        }
        #expect(Set(stored.keys) == Set(referenced.keys), "stored but not referenced: \(Set(stored.keys).subtracting(referenced.keys).sorted().prefix(5)); referenced but missing: \(Set(referenced.keys).subtracting(stored.keys).sorted().prefix(5))")
        for (key, sha) in referenced { #expect(stored[key] == sha, "\(key) differs from its source") }
    }

    @Test func itemsCarryFilesAndStreamTheirChanges() async throws {
        try await withSetup("items") { setup in
            let worker = try startWorker(setup, "worker-items")
            defer { Task { _ = await worker.stop() } }
            var sources: [String: String] = [:]  // S3 key → sha256 of what was uploaded there
            var ids: Set<String> = []
            // 50 posts, each with a picture, every other one with two attachments in a list.
            for i in 0..<50 {
                let picture = try setup.file("p\(i).bin", size: 10_000 + i * 3_000, seed: UInt64(i))
                var item: AttributeMap = ["id": .string("post-\(i)"), "title": .string("post \(i)"), "n": .number(String(i)),
                                          "picture": setup.fileInput(key: "posts/\(i)/picture.bin", path: picture)]
                sources["public/posts/\(i)/picture.bin"] = setup.files[picture]
                if i % 2 == 0 {
                    let other = try setup.file("a\(i).bin", size: 5_000, seed: UInt64(1000 + i))
                    item["attachments"] = .list([setup.fileInput(key: "posts/\(i)/attachment.bin", path: other)])
                    sources["public/posts/\(i)/attachment.bin"] = setup.files[other]
                }
                ids.insert(try await setup.client.putItem(item, into: Self.table, id: "put-\(i)"))
            }
            #expect(try await setup.completed(ids))
            var items = try await setup.tableContents()
            #expect(items.count == 50)
            #expect(items.values.allSatisfy { record in if case .map? = record.item["picture"], record.version == 1 { return true } else { return false } })
            try await expectFilesMatchItems(setup, items, sources: sources)
            #expect(try await eventually(timeout: 60) { Set(setup.feed().filter { $0["eventName"] as? String == "INSERT" }.compactMap { $0["id"] as? String }).count == 50 })
            var records = try await setup.streamRecords()
            #expect(Set(records.filter { $0.eventName == .insert }.map(\.eventID)).count == 50)

            // Read back as a user would: the command line's get and download.
            let got = try await setup.env.ferry(["items", "get", "--table", "posts", "--key", "post-7"])
            #expect(got.contains(#""title":"post 7""#) && got.contains(#""key":"public/posts/7/picture.bin""#), "\(got)")
            let target = setup.env.dataRoot.appendingPathComponent("out/post-7.bin")
            _ = try await setup.env.ferry(["items", "download", "--table", "posts", "--key", "post-7", "--attribute", "picture", "--to", target.path])
            #expect(hex(Digest.sha256(Array(try Data(contentsOf: target)))) == sources["public/posts/7/picture.bin"])
            // A folder (a trailing `/`) receives the file under its key's name.
            let folder = setup.env.dataRoot.appendingPathComponent("out/post-8").path + "/"
            _ = try await setup.env.ferry(["items", "download", "--table", "posts", "--key", "post-8", "--attribute", "picture", "--to", folder])
            #expect(hex(Digest.sha256(Array(try Data(contentsOf: URL(fileURLWithPath: folder + "picture.bin"))))) == sources["public/posts/8/picture.bin"])

            // 10 updates: a new title; posts 0–4 also get a new picture, so their old one goes.
            ids = []
            for i in 0..<10 {
                var set: AttributeMap = ["title": .string("updated \(i)")]
                if i < 5 {
                    let picture = try setup.file("p\(i)-v2.bin", size: 7_000, seed: UInt64(500 + i))
                    set["picture"] = setup.fileInput(key: "posts/\(i)/picture-v2.bin", path: picture)
                    sources["public/posts/\(i)/picture-v2.bin"] = setup.files[picture]
                }
                ids.insert(try await setup.client.updateItem(key: ["id": .string("post-\(i)")], in: Self.table, set: set, remove: ["n"], id: "update-\(i)"))
            }
            // 10 deletes: posts 40–49 and their files.
            for i in 40..<50 { ids.insert(try await setup.client.deleteItem(key: ["id": .string("post-\(i)")], from: Self.table, id: "delete-\(i)")) }
            #expect(try await setup.completed(ids))
            #expect(try await eventually(timeout: 30) {
                try await setup.stored().keys.filter { $0.hasPrefix("public/posts/4") && !$0.hasPrefix("public/posts/4/") }.isEmpty
            })
            items = try await setup.tableContents()
            #expect(items.count == 40)
            #expect(items.values.filter { $0.item["title"]?.stringValue?.hasPrefix("updated") == true }.count == 10)
            #expect(items.values.filter { $0.item["n"] == nil }.count == 10)
            try await expectFilesMatchItems(setup, items, sources: sources)
            records = try await setup.streamRecords()
            let modifies = records.filter { $0.eventName == .modify }
            #expect(Set(modifies.map(\.eventID)).count == 10)
            #expect(modifies.allSatisfy { $0.dynamodb.oldImage?["title"] != nil && $0.dynamodb.newImage?["title"]?.stringValue?.hasPrefix("updated") == true })
            let removes = records.filter { $0.eventName == .remove }
            #expect(Set(removes.map(\.eventID)).count == 10)
            #expect(removes.allSatisfy { $0.dynamodb.oldImage?["picture"] != nil && $0.dynamodb.newImage == nil })
            #expect(try await eventually(timeout: 60) { setup.feed().filter { $0["eventName"] as? String == "REMOVE" }.count >= 10 })

            // A refused file (outside the data root) writes neither the item nor any file: rejected, dead-lettered.
            let refused: AttributeMap = ["id": .string("post-refused"), "picture": setup.fileInput(key: "posts/refused.bin", path: "/etc/passwd")]
            _ = try await setup.client.putItem(refused, into: Self.table, id: "put-refused")
            let status = try await setup.env.terminalStatus(of: "put-refused")
            #expect(status?.state == .rejected && status?.error?.code == "InvalidPath", "\(String(describing: status))")
            // The status and the dead letter are separate outbox messages: wait for the latter too.
            #expect(await eventually(timeout: 30) {
                (try? await setup.env.kcat.consumeAll(topic: "ferry.requests.dlq").contains { $0.value.contains("put-refused") }) == true
            })
            #expect(try await setup.tableContents()["[{\"S\":\"post-refused\"}]"] == nil)
            #expect(try await setup.stored()["public/posts/refused.bin"] == nil)
            // A file key that climbs out of its prefix, sent raw (FerryClient would refuse it): refused the same way.
            let path = try setup.file("f.bin", size: 10, seed: 9)
            let raw = #"{"id":"put-climb","op":"putItem","table":"posts","item":{"id":"post-climb","picture":{"bucket":"items","key":"../private/eve/x.bin","localUri":"PATH"}}}"#
            try await setup.env.kcat.produce(topic: "ferry.requests", key: #"tables/posts/[{"S":"post-climb"}]"#,
                                             value: raw.replacingOccurrences(of: "PATH", with: path))
            let climb = try await setup.env.terminalStatus(of: "put-climb")
            #expect(climb?.state == .rejected, "\(String(describing: climb))")
            #expect(try await setup.tableContents()[#"[{"S":"post-climb"}]"#] == nil)
            #expect(try await setup.stored().keys.allSatisfy { !$0.contains("x.bin") })
        }
    }

    /// The same writes with the worker SIGKILLed twice mid-way: every item ends
    /// written, no item points at a missing file, and nothing is left stored
    /// that no item references.
    /// An item's numbers, from the producer to a stream handler, through a real
    /// worker: written by the Swift client and by `ferry items put`, with 38
    /// digits, at the ends of DynamoDB's range and with trailing zeros, each
    /// arrives in the stream record with its value intact, as boto3's
    /// TypeDeserializer (the reader of Python stream handlers) reads it. Key
    /// `3.0` names the item key `3` names. A number DynamoDB refuses is refused.
    @Test func numbersKeepEveryDigitFromProducerToStreamHandler() async throws {
        try await withSetup("item-numbers") { setup in
            let worker = try startWorker(setup, "worker-numbers")
            defer { Task { _ = await worker.stop() } }
            let written = ["n38": "12345678901234567890123456789012345678", "tiny": "1e-130", "huge": "9.99e125",
                           "money": "12.50", "small": "-0.000123", "round": "1E2"]
            var item: AttributeMap = ["id": .string("num-1")]
            for (name, text) in written { item[name] = .number(text) }
            let viaClient = try await setup.client.putItem(item, into: Self.table, id: "num-client")
            let text = "{\"id\":\"num-2\"," + written.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
            _ = try await setup.env.ferry(["items", "put", "--table", "posts:id", "--id", "num-cli", "--item", text])
            _ = try await setup.env.ferry(["items", "put", "--table", "posts:id", "--id", "num-key-a", "--item", #"{"id":3,"n":1}"#])
            _ = try await setup.env.ferry(["items", "update", "--table", "posts:id", "--id", "num-key-b", "--key", #"{"id":3.0}"#,
                                           "--set", #"{"n":2}"#])
            // Written past the client (which refuses it) straight to the topic, as any producer may.
            let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: setup.env.cluster.bootstrapServers), logger: logger)
            try await producer.send(topic: "ferry.requests", key: Array("tables/posts/x".utf8),
                                    value: Array(#"{"id":"num-bad","op":"putItem","table":"posts","item":{"id":"x","n":1e-400}}"#.utf8))
            #expect(try await setup.completed([viaClient, "num-cli", "num-key-a", "num-key-b", "num-bad"]))
            let bad = try await setup.env.statuses().first { $0.id == "num-bad" && $0.state.isTerminal }
            #expect(bad?.state == .rejected && bad?.error?.message.contains("'item.n' is out of DynamoDB's number range") == true,
                    "\(String(describing: bad))")
            // The stream records as they are on the topic, read by boto3.
            let raw = try await setup.env.kcat.consumeAll(topic: "ferry.streams").map(\.value)
                .filter { $0.contains("\"num-1\"") || $0.contains("\"num-2\"") }
            try #require(raw.count == 2)
            let check = """
                import json, sys
                from decimal import Decimal
                from boto3.dynamodb.types import TypeDeserializer
                written = json.loads(sys.argv[1])
                for line in sys.stdin:
                    image = TypeDeserializer().deserialize({"M": json.loads(line)["dynamodb"]["NewImage"]})
                    for name, text in written.items():
                        assert image[name] == Decimal(text), (name, image[name], text)
                print("ok")
                """
            let verdict = try await runChecked("python3", ["-c", check, String(decoding: try JSONEncoder().encode(written), as: UTF8.self)],
                                               input: Data((raw.joined(separator: "\n") + "\n").utf8))
            #expect(verdict.trimmingCharacters(in: .whitespacesAndNewlines) == "ok", "\(verdict)")
            // 3 and 3.0: one item, updated in place (version 2), not two.
            let items = try await setup.tableContents()
            let keyed = items.values.filter { $0.item["id"]?.stringValue?.hasPrefix("3") == true }
            #expect(keyed.count == 1 && keyed.first?.version == 2 && keyed.first?.item["n"] == .number("2")
                    && keyed.first?.item["id"] == .number("3"), "\(keyed)")
            #expect(items.values.first { $0.item["id"] == .string("num-2") }?.item["n38"] == .number("12345678901234567890123456789012345678"))
        }
    }

    @Test func itemsSurviveSigkill() async throws {
        try await withSetup("items-kill") { setup in
            var worker = try startWorker(setup, "worker-items-kill-1")
            var sources: [String: String] = [:]
            var ids: Set<String> = []
            for i in 0..<40 {
                // Large enough (up to 12 MiB, multipart above 8 MiB) that kills land in the middle of uploads.
                let picture = try setup.file("k\(i).bin", size: 200_000 + (i % 4) * 3_000_000, seed: UInt64(7000 + i))
                let second = try setup.file("k\(i)-b.bin", size: 50_000, seed: UInt64(8000 + i))
                let item: AttributeMap = ["id": .string("post-\(i)"), "title": .string("post \(i)"),
                                          "picture": setup.fileInput(key: "posts/\(i)/picture.bin", path: picture),
                                          "thumb": setup.fileInput(key: "posts/\(i)/thumb.bin", path: second)]
                sources["public/posts/\(i)/picture.bin"] = setup.files[picture]
                sources["public/posts/\(i)/thumb.bin"] = setup.files[second]
                ids.insert(try await setup.client.putItem(item, into: Self.table, id: "kput-\(i)"))
            }
            for round in 1...2 {
                _ = try await eventually(timeout: 90, every: 0.3) {
                    try await setup.env.statuses().filter { $0.state == .completed && ids.contains($0.id) }.count >= round * 12
                }
                _ = await worker.stop(signal: SIGKILL)
                worker = try startWorker(setup, "worker-items-kill-\(round + 1)")
            }
            #expect(try await setup.completed(ids, timeout: 240))
            let items = try await setup.tableContents()
            #expect(items.count == 40)
            #expect(try await setup.env.statuses().filter { ids.contains($0.id) && $0.state.isTerminal }.allSatisfy { $0.state == .completed })
            try await expectFilesMatchItems(setup, items, sources: sources)
            let inserts = try await setup.streamRecords().filter { $0.eventName == .insert }
            #expect(Set(inserts.map(\.eventID)).count == 40)
            #expect(try await eventually(timeout: 60) { Set(setup.feed().compactMap { $0["id"] as? String }).count == 40 })
            _ = await worker.stop()
        }
    }
}

private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
