import FerryCore
@testable import FerryS3
@testable import FerryLocalStore
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Synchronization
import Testing

/// Invariant: when a call of the local store returns, every name it created
/// (a file or a directory) and every index entry it removed is in a directory
/// that an fsync begun after the call started has covered. A file's own fsync
/// does not make its name durable, so without this a power loss could take
/// back what a call reported stored: an object, a bucket, an upload, a part.
/// Checked over generated sequences of calls against an fsync that records
/// which directory it synced and when.
@Suite struct LocalStoreDurabilityTests {
    final class FsyncLog: Sendable {
        struct Entry { var path: String; var start: ContinuousClock.Instant; var end: ContinuousClock.Instant }
        let entries = Mutex<[Entry]>([])

        func fsync(_ path: String) -> FerryError? {
            let start = ContinuousClock.now
            let failure = DirectorySync.fsyncDirectory(path)
            let entry = Entry(path: path, start: start, end: .now)
            entries.withLock { $0.append(entry) }
            return failure
        }

        /// Whether `directory` was fsynced entirely inside `window`.
        func synced(_ directory: String, within window: ClosedRange<ContinuousClock.Instant>) -> Bool {
            entries.withLock { $0.contains { $0.path == directory && window.contains($0.start) && window.contains($0.end) } }
        }
    }

    /// Every path under `root`, directories included.
    static func names(_ root: URL) -> Set<String> {
        var names: Set<String> = []
        let walker = FileManager.default.enumerator(atPath: root.path)
        while let relative = walker?.nextObject() as? String { names.insert(root.path + "/" + relative) }
        return names
    }

    static func parent(_ path: String) -> String { String(path[..<path.lastIndex(of: "/")!]) }

    @Test(arguments: [5, 41, 2026])
    func everyNameACallMadeIsDurableWhenItReturns(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let dir = try TestPaths.temporaryDirectory("local-store-durable")
        defer { try? FileManager.default.removeItem(at: dir) }
        let log = FsyncLog()
        let root = dir.appendingPathComponent("store").standardizedFileURL
        let store = try LocalObjectStore(root: root, pool: .shared, fsyncDirectory: { log.fsync($0) })
        let buckets = ["bk1", "bk2", "bk3"], keys = ["a", "b/c", "d e"]
        var uploads: [(location: ObjectLocation, id: String, parts: [CompletedPart])] = []
        var kinds: [String: Int] = [:]

        for step in 0..<60 {
            let location = ObjectLocation(bucket: buckets.randomElement(using: &random)!, key: keys.randomElement(using: &random)!)
            let bytes = (0..<Int.random(in: 0...2000, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            let before = Self.names(root)
            let start = ContinuousClock.now
            var kind = "none"
            switch Int.random(in: 0..<8, using: &random) {
            case 0, 1:
                kind = "put"
                _ = try await store.putObject(PutObjectInput(bucket: location.bucket, key: location.key), body: .bytes(bytes))
            case 2:
                kind = "copy"
                let destination = PutObjectInput(bucket: buckets.randomElement(using: &random)!, key: "copy/" + location.key)
                do throws(FerryError) {
                    _ = try await store.copyObject(CopyObjectInput(source: location, destination: destination))
                } catch {
                    guard error.code == .noSuchKey else { throw error }
                    kind = "missing"
                }
            case 3:
                kind = "delete"
                _ = try await store.deleteObject(bucket: location.bucket, key: location.key)
            case 4:
                kind = "create upload"
                let id = try await store.createMultipartUpload(PutObjectInput(bucket: location.bucket, key: location.key))
                uploads.append((location, id, []))
            case 5, 6:
                guard let upload = uploads.indices.randomElement(using: &random) else { kind = "none"; break }
                kind = "part"
                let part = try await store.uploadPart(uploads[upload].location, uploadId: uploads[upload].id,
                                                      partNumber: uploads[upload].parts.count + 1, body: .bytes(bytes),
                                                      checksum: .crc32, headers: [:], progress: nil)
                uploads[upload].parts.append(part)
            default:
                guard let upload = uploads.indices.randomElement(using: &random) else { kind = "none"; break }
                let taken = uploads.remove(at: upload)
                if taken.parts.isEmpty {
                    kind = "abort"
                    try await store.abortMultipartUpload(taken.location, uploadId: taken.id)
                } else {
                    kind = "complete"
                    _ = try await store.completeMultipartUpload(taken.location, uploadId: taken.id, parts: taken.parts)
                }
            }
            let window = start...ContinuousClock.now
            kinds[kind, default: 0] += 1
            let after = Self.names(root)
            for created in after.subtracting(before).sorted() {
                #expect(log.synced(Self.parent(created), within: window),
                        "seed \(seed) step \(step) (\(kind)): \(created.dropFirst(root.path.count)) created, its directory not fsynced")
            }
            for removed in before.subtracting(after).sorted() where Self.parent(removed).hasSuffix("/index") {
                #expect(log.synced(Self.parent(removed), within: window),
                        "seed \(seed) step \(step) (\(kind)): \(removed.dropFirst(root.path.count)) removed, its directory not fsynced")
            }
        }
        // The sequence reached every kind of call that creates or removes a name.
        #expect(["put", "copy", "delete", "create upload", "part", "complete"].allSatisfy { kinds[$0, default: 0] > 0 }, "\(kinds)")
    }
}
