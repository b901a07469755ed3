import FerryCore
import FerryS3
import FerryLocalStore
import FerryStorage
import FerryTestSupport
import Foundation
import Synchronization
import Testing
import FerryConcurrency

/// Invariant: the local object store touches the file system only on its
/// blocking pool, never on the caller's thread (async callers run on the
/// cooperative pool, which an fsync would stall). With the store's one pool
/// thread held, no operation may finish or change a file; once released,
/// every one finishes with the answer a model of the store expects.
@Suite struct LocalStoreBlockingTests {
    /// Holds a one-thread pool's thread until opened.
    final class Gate: Sendable {
        let pool = BlockingPool(threads: 1, name: "gate-pool")
        private let entered = Atomic<Bool>(false)
        private let release = DispatchSemaphore(value: 0)

        func close() async throws {
            entered.store(false, ordering: .sequentiallyConsistent)
            Task { [self] in
                await pool.run { () -> Void in
                    self.entered.store(true, ordering: .sequentiallyConsistent)
                    _ = self.release.wait(timeout: .now() + 120)
                }
            }
            while !entered.load(ordering: .sequentiallyConsistent) { try await Task.sleep(for: .milliseconds(1)) }
        }

        func open() { release.signal() }
    }

    final class Flag: Sendable {
        let value = Atomic<Bool>(false)
    }

    /// Every file under `root` with its size: what an operation changed.
    static func snapshot(_ root: URL) -> [String: Int] {
        var files: [String: Int] = [:]
        let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.fileSizeKey])
        while let url = walker?.nextObject() as? URL {
            files[url.path] = (try? url.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? -1
        }
        return files
    }

    @Test func isPoolThreadTellsThePoolsThreadsApart() async throws {
        #expect(!BlockingPool.isPoolThread)
        let gate = Gate()
        #expect(await gate.pool.run { BlockingPool.isPoolThread })
        #expect(await BlockingPool.shared.run { BlockingPool.isPoolThread })
    }

    @Test(arguments: [3, 17, 2026])
    func noOperationRunsOffThePool(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let dir = try TestPaths.temporaryDirectory("local-store-pool")
        defer { try? FileManager.default.removeItem(at: dir) }
        let gate = Gate()
        let storeRoot = dir.appendingPathComponent("store")
        let store = try LocalObjectStore(root: storeRoot, pool: gate.pool)
        let out = dir.appendingPathComponent("out").path
        let keys = ["a", "b/c", "d e", "f/ü"]
        var model: [String: [UInt8]] = [:]  // bucket "bkt"
        var uploads: [(key: String, id: String, parts: [CompletedPart], bytes: [UInt8])] = []

        for step in 0..<40 {
            let key = keys.randomElement(using: &random)!
            let bytes = (0..<Int.random(in: 0...3000, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            let kind = Int.random(in: 0..<10, using: &random)
            let before = Self.snapshot(storeRoot)
            let finished = Flag()
            try await gate.close()
            let lastUpload = uploads.last
            let operation = Task { () async throws -> String in
                defer { finished.value.store(true, ordering: .sequentiallyConsistent) }
                switch kind {
                case 0, 1:
                    _ = try await store.putObject(PutObjectInput(bucket: "bkt", key: key), body: .bytes(bytes))
                    return "put"
                case 2:
                    let fd = Foundation.open(out, O_RDWR | O_CREAT | O_TRUNC, 0o644)
                    defer { Foundation.close(fd) }
                    do {
                        let got = try await store.getObject(bucket: "bkt", key: key, into: fd)
                        return "get \(got.size)"
                    } catch let error as FerryError where error.code == .noSuchKey { return "get none" }
                case 3:
                    return "head \(try await store.headObject(bucket: "bkt", key: key)?.size ?? -1)"
                case 4:
                    do {
                        _ = try await store.copyObject(CopyObjectInput(source: ObjectLocation(bucket: "bkt", key: key),
                                                                       destination: PutObjectInput(bucket: "bkt", key: "copy/" + key)))
                        return "copy"
                    } catch let error as FerryError where error.code == .noSuchKey { return "copy none" }
                case 5:
                    _ = try await store.deleteObject(bucket: "bkt", key: key)
                    return "delete"
                case 6:
                    return "list \(try await store.listObjects(bucket: "bkt", prefix: "", continuation: nil, maxKeys: 1000).items.count)"
                case 7:
                    return "upload " + (try await store.createMultipartUpload(PutObjectInput(bucket: "bkt", key: key)))
                case 8:
                    guard let upload = lastUpload else {
                        do {
                            _ = try await store.listParts(ObjectLocation(bucket: "bkt", key: key), uploadId: "none")
                            return "parts"
                        } catch let error as FerryError where error.code == .noSuchUpload { return "no upload" }
                    }
                    let part = try await store.uploadPart(ObjectLocation(bucket: "bkt", key: upload.key), uploadId: upload.id,
                                                          partNumber: upload.parts.count + 1, body: .bytes(bytes),
                                                          checksum: nil, headers: [:], progress: nil)
                    return "part \(part.partNumber) \(part.eTag)"
                default:
                    guard let upload = lastUpload, !upload.parts.isEmpty else {
                        return "uploads \(try await store.listMultipartUploads(bucket: "bkt", prefix: "").count)"
                    }
                    _ = try await store.completeMultipartUpload(ObjectLocation(bucket: "bkt", key: upload.key),
                                                                uploadId: upload.id, parts: upload.parts)
                    return "complete"
                }
            }
            try await Task.sleep(for: .milliseconds(25))
            let finishedEarly = finished.value.load(ordering: .sequentiallyConsistent)
            #expect(!finishedEarly, "step \(step) (kind \(kind)) finished with the store's pool held")
            #expect(Self.snapshot(storeRoot) == before, "step \(step) (kind \(kind)) changed files with the store's pool held")
            gate.open()
            let answer = try await operation.value

            // The answers a store holding `model` gives.
            switch kind {
            case 0, 1: model[key] = bytes
            case 2:
                #expect(answer == (model[key].map { "get \($0.count)" } ?? "get none"), "step \(step)")
                if let want = model[key] { #expect(Array(try Data(contentsOf: URL(fileURLWithPath: out))) == want) }
            case 3: #expect(answer == "head \(model[key]?.count ?? -1)", "step \(step)")
            case 4:
                #expect(answer == (model[key] == nil ? "copy none" : "copy"), "step \(step)")
                if let source = model[key] { model["copy/" + key] = source }
            case 5: model[key] = nil
            case 6: #expect(answer == "list \(model.count)", "step \(step)")
            case 8 where uploads.isEmpty: #expect(answer == "no upload", "step \(step)")
            case 7: uploads.append((key, String(answer.dropFirst("upload ".count)), [], []))
            case 8:
                if !uploads.isEmpty {
                    let number = uploads[uploads.count - 1].parts.count + 1
                    let eTag = "\"\(Digest.md5(bytes).hexString)\""
                    #expect(answer == "part \(number) \(eTag)", "step \(step)")
                    uploads[uploads.count - 1].parts.append(CompletedPart(partNumber: number, eTag: eTag, size: Int64(bytes.count)))
                    uploads[uploads.count - 1].bytes += bytes
                }
            default:
                if let upload = uploads.last, !upload.parts.isEmpty {
                    uploads.removeLast()
                    #expect(answer == "complete", "step \(step)")
                    model[upload.key] = upload.bytes
                } else {
                    #expect(answer == "uploads \(uploads.count)", "step \(step)")
                }
            }
        }
    }
}
