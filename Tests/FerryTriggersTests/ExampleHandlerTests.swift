import FerryCore
import FerryS3
import FerryTestSupport
import FerryTriggers
import Foundation
import Testing
@testable import Triggers

/// The shipped example handlers do their file work off the concurrency
/// threads and get it right under load: concurrent audit appends stay whole
/// lines, and a checksum manifest's SHA-256 is the object's, as `sha256sum`
/// computes it, with its scratch file gone afterwards.
@Suite struct ExampleHandlerTests {
    func record(_ key: String) -> S3Event.Record {
        S3Event.Record(awsRegion: "us-east-1", eventTime: "2026-01-01T00:00:00.000Z", eventName: "ObjectCreated:Put",
                       userIdentity: .init(principalId: "p"), requestParameters: .init(sourceIPAddress: "127.0.0.1"),
                       responseElements: .init(requestId: "r", id2: "i"),
                       s3: .init(configurationId: "c", bucket: .init(name: "b", ownerIdentity: .init(principalId: "o")),
                                 object: .init(rawKey: key, size: 1, eTag: "e", sequencer: "01")))
    }

    /// Seeded: 200 invocations at once, 1–3 records each, into a directory that
    /// does not exist yet: every record is one intact line.
    @Test func concurrentAuditAppendsStayWholeLines() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-audit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("audit/deeper/audit.jsonl")
        let handler = AuditLogHandler(file: file)
        let context = TriggerContext.local(handlerName: "audit-log", environment: .init(dataRoot: dir, region: "us-east-1"))
        var rng = SeededGenerator(seed: 0xA0D17)
        let batches = (0..<200).map { i in (0..<Int.random(in: 1...3, using: &rng)).map { "k\(i)-\($0)-" + String(repeating: "x", count: Int.random(in: 0...2000, using: &rng)) } }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for keys in batches {
                group.addTask { try await handler.handle(S3Event(records: keys.map(record)), context: context) }
            }
            try await group.waitForAll()
        }
        let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
        let keys = try lines.map { try JSONDecoder().decode(AuditLogHandler.Line.self, from: Data($0.utf8)).key }
        #expect(keys.count == batches.joined().count)
        #expect(Set(keys) == Set(batches.joined()))
    }

    @Test(arguments: [0, 1, 3 << 20, (5 << 20) + 17])
    func checksumManifestDigestIsTheObjects(size: Int) async throws {
        let root = try TestPaths.temporaryDirectory("manifest")
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try LocalObjectStore(root: root.appendingPathComponent(".store"))
        var rng = SeededGenerator(seed: UInt64(size) + 5)
        let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) }
        _ = try await store.putObject(PutObjectInput(bucket: "manifests", key: "public/incoming/a.bin"), body: .bytes(bytes), progress: nil)

        let (got, sha256) = try await ChecksumManifestHandler.digest(bucket: "manifests", key: "public/incoming/a.bin", store: store, scratch: root)
        #expect(got == Int64(size))
        let copy = root.appendingPathComponent("reference.bin")
        try Data(bytes).write(to: copy)
        let reference = try await runChecked("/usr/bin/sha256sum", [copy.path]).split(separator: " ").first.map(String.init)
        #expect(sha256 == reference)
        let scratch = root.appendingPathComponent(".ferry-manifest")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path).isEmpty, "the scratch file stays behind")
    }
}
