import FerryClient
import FerryCore
import FerryEngine
import FerryKafka
import FerryS3
import FerryLocalStore
import FerryStorage
import FerryStore
import FerryWorker
import Foundation
import Logging

/// The `ferry dev --demo` walkthrough: everything goes through Kafka, exactly
/// as a producer would use Ferry.
struct Demo {
    let bootstrapServers: String
    let dataRoot: DataRoot
    /// The embedded object store and the worker's state (the catalog), for the write behind Ferry's back.
    let storeDirectory: URL
    let stateDirectory: URL
    let logger: Logger

    /// The bucket of the demo and of the README's five-minute tour (`ferry dev` takes its notifications).
    static let bucket = "demo"
    var bucket: String { Self.bucket }

    /// Returns whether every step did what it should.
    func run() async throws -> Bool {
        let root = URL(fileURLWithPath: dataRoot.path)
        let inbox = root.appendingPathComponent("demo/in")
        try FileManager.default.createDirectory(at: inbox, withIntermediateDirectories: true)
        let outputs = stateDirectory.appendingPathComponent("trigger-output")
        let auditFile = outputs.appendingPathComponent("audit/audit.jsonl")
        let auditLinesBefore = Self.lines(auditFile).count

        let files: [(String, Data)] = [
            ("hello.txt", Data("Hello from Ferry.\n".utf8)),
            ("report.json", Data(#"{"rows": 3, "ok": true}"#.utf8)),
            ("photo.bin", Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })),
        ]
        for (name, bytes) in files { try bytes.write(to: inbox.appendingPathComponent(name)) }

        let client = try TransferClient(bootstrapServers: bootstrapServers, logger: logger)
        print("\n== Uploading \(files.count) files through Kafka (topic ferry.requests) ==")
        var ok = true
        for (name, _) in files {
            let request = TransferRequest(id: "demo-up-\(name)-\(UUID().uuidString.prefix(8))", op: .upload, bucket: bucket,
                                          key: "photos/\(name)", source: inbox.appendingPathComponent(name).absoluteString)
            ok = try await follow(request, client: client) && ok
        }

        print("\n== Downloading photos/photo.bin back ==")
        let target = root.appendingPathComponent("demo/out/photo.bin")
        try? FileManager.default.removeItem(at: target)
        let download = TransferRequest(id: "demo-down-\(UUID().uuidString.prefix(8))", op: .download, bucket: bucket,
                                       key: "photos/photo.bin", destination: target.absoluteString)
        ok = try await follow(download, client: client) && ok
        let same = FileManager.default.contentsEqual(atPath: target.path, andPath: inbox.appendingPathComponent("photo.bin").path)
        print(same ? "download verified: \(target.path) is byte-identical to the upload"
                   : "DOWNLOAD MISMATCH: \(target.path) differs from the upload")
        ok = ok && same

        print("\n== Trigger output (audit-log handler, \(auditFile.path)) ==")
        let deadline = Date().addingTimeInterval(60)
        var newLines: [String] = []
        while Date() < deadline {
            newLines = Array(Self.lines(auditFile).dropFirst(auditLinesBefore))
            if newLines.count >= files.count { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        newLines.forEach { print($0) }
        if newLines.count < files.count {
            print("expected \(files.count) trigger lines, saw \(newLines.count)")
            ok = false
        }
        ok = try await manifestStep(root: root, client: client) && ok
        ok = try await outsideWriteStep(auditFile: auditFile) && ok
        ok = try await postStep(root: root) && ok
        print(ok ? "\nDemo finished: all transfers completed and the triggers ran." : "\nDemo FAILED (see above).")
        return ok
    }

    /// A stream trigger at work: an upload under incoming/ makes the
    /// checksum-manifest handler enqueue manifests/<name>.sha256.json.
    private func manifestStep(root: URL, client: TransferClient) async throws -> Bool {
        print("\n== Stream trigger (checksum-manifest): uploading incoming/notes.txt ==")
        let notes = root.appendingPathComponent("demo/in/notes.txt")
        try Data("Derived objects are written outside the prefix that triggers them.\n".utf8).write(to: notes)
        let upload = TransferRequest(id: "demo-up-notes-\(UUID().uuidString.prefix(8))", op: .upload, bucket: bucket,
                                     key: "incoming/notes.txt", source: notes.absoluteString)
        guard try await follow(upload, client: client) else { return false }
        let target = root.appendingPathComponent("demo/out/notes.txt.sha256.json")
        print("(the manifest is written by a handler on the objects stream; until it exists a download of it fails with NoSuchKey and is retried)")
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            try await Task.sleep(for: .seconds(1.5))
            try? FileManager.default.removeItem(at: target)
            let fetch = TransferRequest(id: "demo-manifest-\(UUID().uuidString.prefix(8))", op: .download, bucket: bucket,
                                        key: "manifests/notes.txt.sha256.json", destination: target.absoluteString)
            if try await client.run(fetch, timeout: 30).state == .completed, let text = try? String(contentsOf: target, encoding: .utf8) {
                print("manifest s3://\(bucket)/public/manifests/notes.txt.sha256.json: \(text)")
                return true
            }
        }
        print("expected the checksum manifest of incoming/notes.txt within 60 s")
        return false
    }

    /// A record that carries a file: a post whose picture is uploaded first,
    /// then stored in the `posts` table; the post-feed stream trigger writes a
    /// line for it. The item is read back from the table's topic.
    private func postStep(root: URL) async throws -> Bool {
        print("\n== A record with a file: putItem posts/{id} with a picture (uploaded first), stream trigger post-feed ==")
        let picture = root.appendingPathComponent("demo/in/post-picture.bin")
        try Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: picture)
        let postId = "post-\(UUID().uuidString.prefix(6).lowercased())"
        let items = try ItemClient(bootstrapServers: bootstrapServers, logger: logger)
        let item: AttributeMap = [
            "id": .string(postId), "title": .string("First light"),
            "picture": .map(["bucket": .string(bucket), "key": .string("posts/\(postId).bin"), "region": .string("us-east-1"),
                             "localUri": .string(picture.path), "mimeType": .string("application/octet-stream")]),
        ]
        let id = try await items.putItem(item, into: DevCommand.postsTable)
        let status = try await items.result(of: id, timeout: 120)
        print("putItem \(id): \(status.state.rawValue)\(status.error.map { " \($0)" } ?? "")")
        guard status.state == .completed, let stored = try await items.get(table: "posts", partitionKey: postId) else { return false }
        print("posts/\(postId): \(stored.item["picture"].map(\.description) ?? "-")")
        return try await Self.printLine(in: stateDirectory.appendingPathComponent("trigger-output/feed/posts.jsonl"), containing: postId, what: "a post-feed line")
    }

    /// Waits up to 60 s for a line of `file` that contains `text` and prints it; false (with a reason) when none came.
    private static func printLine(in file: URL, containing text: String, what: String) async throws -> Bool {
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if let line = lines(file).first(where: { $0.contains(text) }) {
                print(line)
                return true
            }
            try await Task.sleep(for: .milliseconds(300))
        }
        print("expected \(what) for \(text) within 60 s")
        return false
    }

    /// Every write is an event: an object put straight into the store (as any
    /// S3 client, or a presigned PUT, would) is announced by `ferry reconcile`,
    /// and the audit trigger runs for it. (With Ceph, MinIO or AWS the store's
    /// own notifications announce it at once: docs/operators/ingest.md.)
    private func outsideWriteStep(auditFile: URL) async throws -> Bool {
        print("\n== A write behind Ferry's back: public/outside/elsewhere.txt put straight into the store, then ferry reconcile ==")
        let store = try LocalObjectStore(root: storeDirectory)
        let key = "public/outside/elsewhere-\(UUID().uuidString.prefix(6)).txt"
        _ = try await store.putObject(PutObjectInput(bucket: bucket, key: key, contentType: "text/plain"),
                                      body: .bytes(Array("written by another client\n".utf8)), progress: nil)
        let kafka = KafkaConfiguration(bootstrapServers: bootstrapServers)
        let reconciler = Reconciler(store: store, catalog: try ObjectCatalog(directory: stateDirectory),
                                    producer: try KafkaProducer(configuration: kafka, logger: logger), kafka: kafka, topics: Topics(),
                                    region: "us-east-1", resolver: DefaultPrefixResolver(), logger: logger)
        try await reconciler.catchUp()
        let report = try await reconciler.reconcile(bucket: bucket, prefix: "public/outside/")
        print("reconcile: \(report)")
        return try await Self.printLine(in: auditFile, containing: key, what: "an audit line")
    }

    private func follow(_ request: TransferRequest, client: TransferClient) async throws -> Bool {
        let display = ProgressDisplay(label: request.key)
        for await status in try await client.enqueueAndFollow(request) {
            display.show(status)
            if status.state.isTerminal { return status.state == .completed }
        }
        return false
    }

    static func lines(_ file: URL) -> [String] {
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").map(String.init)
    }
}
