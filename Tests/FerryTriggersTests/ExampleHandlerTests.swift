import FerryCore
import FerryS3
import FerryLocalStore
import FerryStorage
import FerryTestSupport
import FerryTriggerKit
import FerryTriggers
import Foundation
import Testing
@testable import Triggers

/// The checksum-manifest example reads the object through the kit's
/// `ObjectReader` (as a worker hands it out) and enqueues a manifest with
/// the object's SHA-256; the reader streams in ranges and leaves no scratch
/// file behind.
@Suite struct ExampleHandlerTests {
    static func record(_ key: String) -> DynamoDBEvent.Record {
        DynamoDBEvent.Record(
            eventID: "e-\(key.count)", eventName: .insert, awsRegion: "us-east-1",
            eventSourceARN: "arn:aws:dynamodb:us-east-1:000000000000:table/objects/stream/ferry",
            dynamodb: StreamRecord(approximateCreationDateTime: 0, keys: ["bucket": .string("manifests"), "key": .string(key)],
                                   newImage: nil, oldImage: nil, sequenceNumber: "100000000000000000001", streamViewType: .keysOnly))
    }

    /// Sizes around the reader's 4 MiB ranges: empty, one byte, under one range, exactly two, two and a bit.
    @Test(arguments: [0, 1, 3 << 20, 8 << 20, (9 << 20) + 17])
    func theManifestNamesTheObjectsSHA256(size: Int) async throws {
        let root = try TestPaths.temporaryDirectory("manifest")
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try LocalObjectStore(root: root.appendingPathComponent(".store"))
        var rng = SeededGenerator(seed: UInt64(size) + 5)
        let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let key = "public/incoming/a.bin"
        _ = try await store.putObject(PutObjectInput(bucket: "manifests", key: key), body: .bytes(bytes), progress: nil)

        let output = root.appendingPathComponent("output")
        let environment = TriggerEnvironment.worker(dataRoot: root, outputDirectory: output, region: "us-east-1",
                                                    store: store, transport: TestHTTP.transport)
        let recorded = RecordedTransfers()
        let context = TriggerContext.local(handlerName: "checksum-manifest", environment: environment, recorder: recorded)
        let response = try await ChecksumManifestHandler().handle(DynamoDBEvent(records: [Self.record(key)]), context: context)
        #expect(response.batchItemFailures.isEmpty)

        let requests = recorded.requests
        try #require(requests.count == 1)
        #expect(requests[0].key == "manifests/a.bin.sha256.json" && requests[0].op == .upload && requests[0].id == "manifest-e-\(key.count)")
        let manifest = try JSONDecoder().decode(ChecksumManifestHandler.Manifest.self,
                                                from: Data(try DataURI.decode(requests[0].source ?? "", limit: 1 << 20)))
        let copy = root.appendingPathComponent("reference.bin")
        try Data(bytes).write(to: copy)
        let reference = try await runChecked("/usr/bin/sha256sum", [copy.path]).split(separator: " ").first.map(String.init)
        #expect(manifest.sha256 == reference)
        #expect(manifest.size == Int64(size))
        let scratch = output.appendingPathComponent(".ferry-read")
        #expect((try? FileManager.default.contentsOfDirectory(atPath: scratch.path))?.isEmpty ?? true, "a scratch file stays behind")
    }

    /// An object overwritten while a handler reads it fails the read: the
    /// handler never hashes the first range of one version and the rest of another.
    @Test func anObjectChangedWhileReadFailsTheRead() async throws {
        let root = try TestPaths.temporaryDirectory("manifest-change")
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try LocalObjectStore(root: root.appendingPathComponent(".store"))
        let key = "public/incoming/b.bin"
        _ = try await store.putObject(PutObjectInput(bucket: "manifests", key: key), body: .bytes([UInt8](repeating: 1, count: 9 << 20)), progress: nil)
        let environment = TriggerEnvironment.worker(dataRoot: root, outputDirectory: root.appendingPathComponent("output"),
                                                    region: "us-east-1", store: store, transport: TestHTTP.transport)
        let object = try #require(try await environment.objects?.object(bucket: "manifests", key: key))
        var chunks = object.bytes.makeAsyncIterator()
        #expect(try await chunks.next()?.count == 4 << 20)
        _ = try await store.putObject(PutObjectInput(bucket: "manifests", key: key), body: .bytes([UInt8](repeating: 2, count: 9 << 20)), progress: nil)
        await #expect(throws: (any Error).self) { _ = try await chunks.next() }
        #expect(try await environment.objects?.object(bucket: "manifests", key: "public/incoming/none") == nil)
    }
}
