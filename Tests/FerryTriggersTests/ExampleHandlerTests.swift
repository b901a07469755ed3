import FerryCore
import FerryS3
import FerryTestSupport
import FerryTriggers
import Foundation
import Testing
@testable import Triggers

/// The checksum-manifest example hashes on the blocking pool and gets the
/// object's SHA-256, with its scratch file gone afterwards. (The audit
/// example's tests are in `TriggerMatchingTests`.)
@Suite struct ExampleHandlerTests {
    /// The object's SHA-256 as `sha256sum` computes it, from 0 bytes to a few MiB.
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
