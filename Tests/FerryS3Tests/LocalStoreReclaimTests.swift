import FerryCore
@testable import FerryS3
@testable import FerryLocalStore
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// Invariants of the local store's reclaim pass: it removes exactly what a
/// crashed write leaves (an unnamed blob, a temp index entry, a blob still
/// under its hidden creation name) once older than the grace, and never a
/// byte of a committed object or of a write in flight, even with no grace.
@Suite struct LocalStoreReclaimTests {
    static let buckets = ["bk1", "bk2"]

    static func read(_ store: LocalObjectStore, _ location: ObjectLocation, scratch: URL) async throws -> [UInt8] {
        let path = scratch.appendingPathComponent(UUID().uuidString).path
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o644)
        defer { close(fd); unlink(path) }
        _ = try await store.getObject(bucket: location.bucket, key: location.key, into: fd)
        return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    static func names(_ dir: URL) -> Set<String> {
        Set((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? [])
    }

    /// The blobs the bucket's index entries name.
    static func namedBlobs(_ bucketDir: URL) throws -> Set<String> {
        let index = bucketDir.appendingPathComponent("index")
        return Set(try names(index).filter { $0.hasSuffix(".json") }.map { name in
            try JSONDecoder().decode(LocalObjectStore.IndexEntry.self, from: Data(contentsOf: index.appendingPathComponent(name))).blob
        })
    }

    static func entryJSON(key: String, blob: String, size: Int) -> [UInt8] {
        Array(#"{"key":"\#(key)","blob":"\#(blob)","size":\#(size),"eTag":"\"x\"","metadata":{},"lastModified":0}"#.utf8)
    }

    /// Generated committed states (puts, overwrites, copies, deletes, multipart
    /// completions) with generated crash leftovers beside them, some old and
    /// some young: one pass removes exactly the old leftovers and reports their
    /// counts and bytes; every object reads back whole; a second pass finds nothing.
    @Test(arguments: [3, 17, 2026])
    func aPassRemovesExactlyTheOldLeftoversOfCrashedWrites(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let dir = try TestPaths.temporaryDirectory("local-store-reclaim")
        defer { try? FileManager.default.removeItem(at: dir) }
        let root = dir.appendingPathComponent("store")
        let store = try LocalObjectStore(root: root)
        var objects: [ObjectLocation: [UInt8]] = [:]
        func bytes(_ random: inout SeededGenerator) -> [UInt8] {
            (0..<Int.random(in: 0...5000, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
        }
        for bucket in Self.buckets {
            let location = ObjectLocation(bucket: bucket, key: "first")
            objects[location] = bytes(&random)
            _ = try await store.putObject(PutObjectInput(bucket: bucket, key: "first"), body: .bytes(objects[location]!))
        }
        for _ in 0..<40 {
            let location = ObjectLocation(bucket: Self.buckets.randomElement(using: &random)!, key: "k\(Int.random(in: 0..<8, using: &random))")
            switch Int.random(in: 0..<5, using: &random) {
            case 0, 1:
                let body = bytes(&random)
                _ = try await store.putObject(PutObjectInput(bucket: location.bucket, key: location.key), body: .bytes(body))
                objects[location] = body
            case 2:
                guard let source = objects.keys.sorted(by: { "\($0)" < "\($1)" }).randomElement(using: &random) else { continue }
                _ = try await store.copyObject(CopyObjectInput(source: source, destination: PutObjectInput(bucket: location.bucket, key: location.key)))
                objects[location] = objects[source]
            case 3:
                _ = try await store.deleteObject(bucket: location.bucket, key: location.key)
                objects[location] = nil
            default:
                let id = try await store.createMultipartUpload(PutObjectInput(bucket: location.bucket, key: location.key))
                let one = bytes(&random), two = bytes(&random)
                let parts = [
                    try await store.uploadPart(location, uploadId: id, partNumber: 1, body: .bytes(one), checksum: nil, headers: [:], progress: nil),
                    try await store.uploadPart(location, uploadId: id, partNumber: 2, body: .bytes(two), checksum: nil, headers: [:], progress: nil),
                ]
                _ = try await store.completeMultipartUpload(location, uploadId: id, parts: parts)
                objects[location] = one + two
            }
        }

        // Leftovers as a crash leaves them, an hour old or a second old.
        var expected = LocalStoreReclaim()
        var young: Set<String> = []
        for _ in 0..<Int.random(in: 8...24, using: &random) {
            let bucketDir = root.appendingPathComponent(Self.buckets.randomElement(using: &random)!)
            let old = Bool.random(using: &random)
            let blob = UUID().uuidString, body = bytes(&random)
            var made: [String] = []
            switch Int.random(in: 0..<4, using: &random) {
            case 0:  // bytes written, the entry never begun (or a replaced blob its writer did not remove)
                made.append("blobs/\(blob)")
                if old { expected.blobs += 1; expected.bytes += Int64(body.count) }
            case 1:  // bytes written, the temp entry written, never renamed
                made += ["blobs/\(blob)", "index/.tmp-\(UUID().uuidString)"]
                if old { expected.blobs += 1; expected.bytes += Int64(body.count); expected.tempEntries += 1 }
            case 2:  // the temp entry cut while it was written
                made.append("index/.tmp-\(UUID().uuidString)")
                if old { expected.tempEntries += 1 }
            default: // killed between creating the blob and renaming it to its name
                made.append("blobs/\(NewBlob.hiddenPrefix)\(blob)")
                if old { expected.blobs += 1 }
            }
            for relative in made {
                let path = bucketDir.appendingPathComponent(relative).path
                let content: [UInt8]
                if relative.hasPrefix("index/") {
                    let entry = Self.entryJSON(key: "lost", blob: blob, size: body.count)
                    content = made.count == 2 ? entry : Array(entry.prefix(Int.random(in: 0..<entry.count, using: &random)))
                } else {
                    content = relative.contains(NewBlob.hiddenPrefix) ? [] : body
                }
                #expect(FileManager.default.createFile(atPath: path, contents: Data(content)))
                if old { TestPaths.age(path, seconds: 3600) } else { young.insert(path) }
            }
        }

        let found = try await store.reclaimAbandonedWrites(grace: 600)
        #expect(found == expected, "seed \(seed)")
        for (location, body) in objects {
            #expect(try await Self.read(store, location, scratch: dir) == body, "seed \(seed): \(location)")
        }
        for bucket in Self.buckets {
            let bucketDir = root.appendingPathComponent(bucket)
            let youngBlobs = Set(young.filter { $0.hasPrefix(bucketDir.path + "/blobs/") }.map { URL(fileURLWithPath: $0).lastPathComponent })
            let youngTemps = Set(young.filter { $0.hasPrefix(bucketDir.path + "/index/") }.map { URL(fileURLWithPath: $0).lastPathComponent })
            #expect(Self.names(bucketDir.appendingPathComponent("blobs")) == (try Self.namedBlobs(bucketDir)).union(youngBlobs), "seed \(seed)")
            #expect(Self.names(bucketDir.appendingPathComponent("index")).filter { !$0.hasSuffix(".json") } == youngTemps, "seed \(seed)")
        }
        #expect(try await store.reclaimAbandonedWrites(grace: 600) == LocalStoreReclaim(), "seed \(seed): a second pass")
    }

    /// A blob whose lock someone holds (a writer in another process) stays,
    /// with the temp entry that names it, however old; once let go, both go.
    @Test func aLockedBlobStaysUntilItsWriterLetsGo() async throws {
        let dir = try TestPaths.temporaryDirectory("local-store-reclaim")
        defer { try? FileManager.default.removeItem(at: dir) }
        let root = dir.appendingPathComponent("store")
        let store = try LocalObjectStore(root: root)
        _ = try await store.putObject(PutObjectInput(bucket: "bkt", key: "k"), body: .bytes([1, 2, 3]))
        let blob = UUID().uuidString
        let blobPath = root.appendingPathComponent("bkt/blobs/\(blob)").path
        let tempPath = root.appendingPathComponent("bkt/index/.tmp-\(UUID().uuidString)").path
        #expect(FileManager.default.createFile(atPath: blobPath, contents: Data([9, 9])))
        #expect(FileManager.default.createFile(atPath: tempPath, contents: Data(Self.entryJSON(key: "k2", blob: blob, size: 2))))
        TestPaths.age(blobPath, seconds: 3600)
        TestPaths.age(tempPath, seconds: 3600)

        let writer = open(blobPath, O_RDONLY)
        #expect(flock(writer, LOCK_EX) == 0)
        #expect(try await store.reclaimAbandonedWrites(grace: 0) == LocalStoreReclaim())
        #expect(FileManager.default.fileExists(atPath: blobPath) && FileManager.default.fileExists(atPath: tempPath))
        close(writer)

        var expected = LocalStoreReclaim()
        expected.blobs = 1
        expected.bytes = 2
        expected.tempEntries = 1
        #expect(try await store.reclaimAbandonedWrites(grace: 0) == expected)
        #expect(try await Self.read(store, ObjectLocation(bucket: "bkt", key: "k"), scratch: dir) == [1, 2, 3])
    }

    /// An index entry that cannot be read names a blob nobody knows: that
    /// bucket's blobs are all left, and the reason is reported.
    @Test func anUnreadableIndexEntryLeavesItsBucketsBlobsAlone() async throws {
        let dir = try TestPaths.temporaryDirectory("local-store-reclaim")
        defer { try? FileManager.default.removeItem(at: dir) }
        let root = dir.appendingPathComponent("store")
        let store = try LocalObjectStore(root: root)
        _ = try await store.putObject(PutObjectInput(bucket: "bkt", key: "k"), body: .bytes([1]))
        let orphan = root.appendingPathComponent("bkt/blobs/\(UUID().uuidString)").path
        #expect(FileManager.default.createFile(atPath: orphan, contents: Data([7])))
        TestPaths.age(orphan, seconds: 3600)
        #expect(FileManager.default.createFile(atPath: root.appendingPathComponent("bkt/index/\(String(repeating: "0", count: 64)).json").path,
                                               contents: Data("{not json".utf8)))
        let found = try await store.reclaimAbandonedWrites(grace: 0)
        #expect(found.blobs == 0 && found.skipped.count == 1 && found.skipped[0].contains("not a valid entry"), "\(found)")
        #expect(FileManager.default.fileExists(atPath: orphan))
    }

    /// Every file under `dir`, and `dir` itself, made `seconds` old.
    static func ageTree(_ dir: URL, seconds: Double) {
        for name in names(dir) { TestPaths.age(dir.appendingPathComponent(name).path, seconds: seconds) }
        TestPaths.age(dir.path, seconds: seconds)
    }

    static func treeBytes(_ dir: URL) -> Int64 {
        names(dir).reduce(0) { sum, name in
            sum + ((try? FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent(name).path)[.size] as? Int64) ?? 0)
        }
    }

    /// A multipart upload idle past `idleUploadsAfter` goes (with its bytes
    /// counted), as S3's lifecycle rule would take it, unless a transfer holds
    /// it; one with a recent part stays and completes; without the age asked for, only a directory whose
    /// record a crash cut short goes (no call could ever reach it).
    @Test func idleUploadsGoAfterTheirAgeAndActiveOnesStay() async throws {
        let dir = try TestPaths.temporaryDirectory("local-store-reclaim")
        defer { try? FileManager.default.removeItem(at: dir) }
        let root = dir.appendingPathComponent("store")
        let store = try LocalObjectStore(root: root)
        let idle = ObjectLocation(bucket: "bkt", key: "idle"), active = ObjectLocation(bucket: "bkt", key: "active")
        let idleId = try await store.createMultipartUpload(PutObjectInput(bucket: "bkt", key: idle.key))
        for number in 1...2 {
            _ = try await store.uploadPart(idle, uploadId: idleId, partNumber: number, body: .bytes(Array(repeating: 1, count: 100 * number)),
                                           checksum: nil, headers: [:], progress: nil)
        }
        let idleDir = root.appendingPathComponent("bkt/uploads/\(idleId)")
        Self.ageTree(idleDir, seconds: 7200)
        let activeId = try await store.createMultipartUpload(PutObjectInput(bucket: "bkt", key: active.key))
        Self.ageTree(root.appendingPathComponent("bkt/uploads/\(activeId)"), seconds: 7200)
        let part = try await store.uploadPart(active, uploadId: activeId, partNumber: 1, body: .bytes([7, 7, 7]),
                                              checksum: nil, headers: [:], progress: nil)
        let torn = root.appendingPathComponent("bkt/uploads/\(UUID().uuidString.lowercased())")
        try FileManager.default.createDirectory(at: torn, withIntermediateDirectories: false)
        #expect(FileManager.default.createFile(atPath: torn.appendingPathComponent("upload.json").path, contents: Data("{\"ke".utf8)))
        Self.ageTree(torn, seconds: 7200)

        var expected = LocalStoreReclaim()
        expected.uploads = 1
        expected.bytes = 4  // the torn record
        #expect(try await store.reclaimAbandonedWrites(grace: 600) == expected, "without an age: only the torn one")
        #expect(try await store.listMultipartUploads(bucket: "bkt", prefix: "").map(\.uploadId).sorted() == [activeId, idleId].sorted())

        // Held by a transfer of this process (a paused one, say): it stays however idle.
        #expect(try await store.reclaimAbandonedWrites(grace: 600, idleUploadsAfter: 3600, inUse: { $0 == idleId }) == LocalStoreReclaim())
        expected.bytes = Self.treeBytes(idleDir)
        #expect(expected.bytes > 300)
        #expect(try await store.reclaimAbandonedWrites(grace: 600, idleUploadsAfter: 3600) == expected, "the idle one")
        #expect(try await store.listMultipartUploads(bucket: "bkt", prefix: "").map(\.uploadId) == [activeId])
        await #expect { _ = try await store.listParts(idle, uploadId: idleId) } throws: { ($0 as? FerryError)?.code == .noSuchUpload }
        _ = try await store.completeMultipartUpload(active, uploadId: activeId, parts: [part])
        #expect(try await Self.read(store, active, scratch: dir) == [7, 7, 7])
    }

    /// Writers (single PUTs, overwrites, multipart completions) race passes
    /// that have no grace at all: every write that returned reads back whole,
    /// and after the last pass the blobs are exactly the ones the index names.
    @Test(arguments: [11, 99])
    func writesInFlightSurvivePassesWithoutGrace(seed: UInt64) async throws {
        let dir = try TestPaths.temporaryDirectory("local-store-reclaim")
        defer { try? FileManager.default.removeItem(at: dir) }
        let root = dir.appendingPathComponent("store")
        let store = try LocalObjectStore(root: root)
        _ = try await store.putObject(PutObjectInput(bucket: "bkt", key: "seed"), body: .bytes([0]))

        let last = try await withThrowingTaskGroup(of: [ObjectLocation: [UInt8]].self) { group in
            for writer in 0..<4 {
                group.addTask {
                    var random = SeededGenerator(seed: seed &+ UInt64(writer))
                    var mine: [ObjectLocation: [UInt8]] = [:]
                    for _ in 0..<30 {
                        let location = ObjectLocation(bucket: "bkt", key: "w\(writer)/k\(Int.random(in: 0..<4, using: &random))")
                        let body = (0..<Int.random(in: 0...300_000, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                        if Bool.random(using: &random) {
                            _ = try await store.putObject(PutObjectInput(bucket: "bkt", key: location.key), body: .bytes(body))
                        } else {
                            let id = try await store.createMultipartUpload(PutObjectInput(bucket: "bkt", key: location.key))
                            let half = body.count / 2
                            let parts = [
                                try await store.uploadPart(location, uploadId: id, partNumber: 1, body: .bytes(Array(body[..<half])),
                                                           checksum: nil, headers: [:], progress: nil),
                                try await store.uploadPart(location, uploadId: id, partNumber: 2, body: .bytes(Array(body[half...])),
                                                           checksum: nil, headers: [:], progress: nil),
                            ]
                            _ = try await store.completeMultipartUpload(location, uploadId: id, parts: parts)
                        }
                        mine[location] = body
                    }
                    return mine
                }
            }
            let sweeping = Task {
                // A pass may take a replaced blob before its writer removes it (both unlink it):
                // what it must never take is checked by reading every object back.
                var passes = 0
                while !Task.isCancelled {
                    let found = try await store.reclaimAbandonedWrites(grace: 0)
                    #expect(found.tempEntries == 0 && found.skipped.isEmpty, "\(found)")
                    passes += 1
                }
                return passes
            }
            var all: [ObjectLocation: [UInt8]] = [:]
            for try await mine in group { all.merge(mine) { a, _ in a } }
            sweeping.cancel()
            let passes = try await sweeping.value
            #expect(passes > 5, "only \(passes) passes ran beside the writers")
            return all
        }
        for (location, body) in last {
            #expect(try await Self.read(store, location, scratch: dir) == body, "seed \(seed): \(location)")
        }
        #expect(try await store.reclaimAbandonedWrites(grace: 0) == LocalStoreReclaim())
        let bucketDir = root.appendingPathComponent("bkt")
        #expect(Self.names(bucketDir.appendingPathComponent("blobs")) == (try Self.namedBlobs(bucketDir)))
        #expect(Self.names(bucketDir.appendingPathComponent("index")).allSatisfy { $0.hasSuffix(".json") })
    }
}
