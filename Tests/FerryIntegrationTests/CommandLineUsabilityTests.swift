import FerryTestSupport
import Foundation
import Testing

/// What a new user meets on the command line: an error names the usage of the
/// subcommand at hand, ids are printed whole so they can be pasted into the
/// next command, and the request's S3 headers can be given as flags.
@Suite struct CommandLineUsabilityTests {
    let ferry = TestPaths.ferryBinary

    @Test(arguments: [
        (["enqueue", "upload", "--bucket", "b", "--key", "k", "--source", "data:,x", "--part-concurrency", "999",
          "--bootstrap-servers", "127.0.0.1:1"], "ferry enqueue", "--part-concurrency must be 1…64"),
        (["enqueue", "upload", "--bucket", "b", "--key", "k", "--source", "data:,x", "--header", "x-evil: 1",
          "--bootstrap-servers", "127.0.0.1:1"], "ferry enqueue", "header 'x-evil' is not allowed"),
        (["enqueue", "upload", "--bucket", "b", "--key", "k", "--source", "data:,x", "--header", "no-separator",
          "--bootstrap-servers", "127.0.0.1:1"], "ferry enqueue", "--header wants NAME: VALUE or NAME=VALUE"),
        (["cp", "/etc/hostname", "s3://b/k", "--header", "cache-control: a\u{7}b"], "ferry cp", "header 'cache-control'"),
        (["pause", "bad id!"], "ferry pause", "is no transfer id"),
        (["items", "get", "--table", "t", "--key", "k", "--timeout", "0", "--bootstrap-servers", "127.0.0.1:1"], "ferry items get", "--timeout"),
    ])
    func aUsageErrorShowsTheSubcommandsUsage(arguments: [String], command: String, reason: String) async throws {
        let result = try await runCommand(ferry, arguments)
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains(reason), "\(result.stderr)")
        #expect(result.stderr.contains("Usage: \(command) "), "\(result.stderr)")
        #expect(result.stderr.contains("See '\(command) --help'"), "\(result.stderr)")
        #expect(!result.stderr.contains("Usage: ferry <subcommand>"), "\(result.stderr)")
    }

    /// A request's `headers` from `--header`, in both spellings; a value may hold `=` and `:`.
    @Test func enqueueSendsTheHeadersGiven() async throws {
        let dir = try TestPaths.temporaryDirectory("enqueue-headers")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (kafka, bootstrap) = try await CommandLineTests().kafkaOnly(partitions: 1, logs: dir)
        let key = "0123456789abcdef0123456789abcdef"
        _ = try await runChecked(ferry, ["enqueue", "upload", "--bucket", "bkt", "--key", "k", "--source", "data:,x", "--id", "h1",
                                         "--header", "Cache-Control: max-age=60, public",
                                         "--header", "x-amz-server-side-encryption-customer-key=\(Data(key.utf8).base64EncodedString())",
                                         "--bootstrap-servers", bootstrap])
        let records = try await Kcat(bootstrapServers: bootstrap).consumeAll(topic: "ferry.requests")
        let record = try #require(records.first)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(record.value.utf8)) as? [String: Any])
        let headers = try #require(json["headers"] as? [String: String], "\(json)")
        #expect(headers["Cache-Control"] == "max-age=60, public", "\(headers)")
        #expect(headers["x-amz-server-side-encryption-customer-key"] == Data(key.utf8).base64EncodedString(), "\(headers)")
        #expect(await kafka.stop() == 0)
    }

    /// `ferry cp --header` stores the header with the object, as boto3 reads it back.
    @Test func copySendsTheHeadersGiven() async throws {
        try await MotoServer.start(logDirectory: try TestPaths.temporaryDirectory("cp-headers-moto")).stopAfter { moto in
            let s3 = Boto3(moto)
            try await s3("create-bucket", "hdr")
            let environment = ["AWS_ACCESS_KEY_ID": moto.accessKeyId, "AWS_SECRET_ACCESS_KEY": moto.secretAccessKey, "AWS_REGION": "us-east-1"]
            _ = try await runChecked(ferry, ["cp", "/etc/hostname", "s3://hdr/one", "--s3-endpoint", moto.endpoint,
                                             "--header", "cache-control: max-age=60"], environment: environment)
            let dir = try TestPaths.temporaryDirectory("cp-headers")
            defer { try? FileManager.default.removeItem(at: dir) }
            try Data("a".utf8).write(to: dir.appendingPathComponent("a.txt"))
            _ = try await runChecked(ferry, ["cp", "--recursive", dir.path, "s3://hdr/tree/", "--s3-endpoint", moto.endpoint,
                                             "--header", "cache-control=no-store", "--metadata", "team=blue"], environment: environment)
            struct Head: Decodable { var CacheControl: String?; var Metadata: [String: String] }
            let one = try JSONDecoder().decode(Head.self, from: Data(try await s3("head", "hdr", "one").utf8))
            #expect(one.CacheControl == "max-age=60")
            let tree = try JSONDecoder().decode(Head.self, from: Data(try await s3("head", "hdr", "tree/a.txt").utf8))
            #expect(tree.CacheControl == "no-store" && tree.Metadata["team"] == "blue", "\(tree)")
        }
    }

    /// `ferry transfers` prints a UUID id whole; `ferry pause` says how to follow the transfer.
    @Test func idsArePrintedWhole() async throws {
        let dir = try TestPaths.temporaryDirectory("ids-whole")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (kafka, bootstrap) = try await CommandLineTests().kafkaOnly(partitions: 1, logs: dir)
        let id = UUID().uuidString.lowercased()
        let status = #"{"id":"\#(id)","op":"upload","state":"running","bytesTransferred":1,"totalBytes":2,"worker":"w","time":"2026-12-07T00:00:00.000Z"}"#
        try await Kcat(bootstrapServers: bootstrap).produce(topic: "ferry.status", key: id, value: status)
        let listed = try await runChecked(ferry, ["transfers", "--bootstrap-servers", bootstrap])
        #expect(listed.contains(id + " "), "\(listed)")
        let paused = try await runChecked(ferry, ["pause", id, "--bootstrap-servers", bootstrap])
        #expect(paused.contains("ferry status \(id)") && !paused.contains("enqueue"), "\(paused)")
        #expect(await kafka.stop() == 0)
    }

    /// The write verbs take `--table NAME` as the read verbs do: the keys come from
    /// the items the table's topic holds; a table with none asks for `NAME:KEYS`.
    @Test func writesLearnATablesKeysFromItsItems() async throws {
        let dir = try TestPaths.temporaryDirectory("items-table-name")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (kafka, bootstrap) = try await CommandLineTests().kafkaOnly(partitions: 1, logs: dir)
        let record = #"{"table":"posts","keySchema":["id"],"keys":{"id":{"S":"p1"}},"item":{"id":{"S":"p1"},"title":{"S":"one"}},"version":1,"requestId":"r1","updatedAt":"2026-12-07T00:00:00.000Z"}"#
        try await Kcat(bootstrapServers: bootstrap).produce(topic: "ferry.tables.posts", key: #"[{"S":"p1"}]"#, value: record)
        for arguments in [["put", "--item", #"{"id":"p2","title":"two"}"#], ["update", "--key", #"{"id":"p1"}"#, "--set", #"{"title":"uno"}"#],
                          ["delete", "--key", #"{"id":"p1"}"#]] {
            _ = try await runChecked(ferry, ["items"] + arguments + ["--table", "posts", "--bootstrap-servers", bootstrap])
        }
        let sent = try await Kcat(bootstrapServers: bootstrap).consumeAll(topic: "ferry.requests")
        #expect(sent.map(\.key) == [#"tables/posts/[{"S":"p2"}]"#, #"tables/posts/[{"S":"p1"}]"#, #"tables/posts/[{"S":"p1"}]"#], "\(sent.map(\.key))")
        let empty = try await runCommand(ferry, ["items", "put", "--table", "drafts", "--item", #"{"id":"d1"}"#, "--bootstrap-servers", bootstrap])
        #expect(empty.status == 64 && empty.stderr.contains("table 'drafts' holds no items yet") && empty.stderr.contains("--table drafts:PARTITION_KEY"),
                "\(empty)")
        #expect(await kafka.stop() == 0)
    }
}
