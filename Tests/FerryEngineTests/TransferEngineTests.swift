import FerryCore
import FerryEngine
import FerryS3
import FerryLocalStore
import FerryStorage
import FerryTestSupport
import Foundation
import Logging
import Synchronization
import Testing

/// The transfer engine against real servers: moto, Ceph's RADOS Gateway and
/// the local store, all through the same `ObjectStore` seam.
@Suite(.serialized) struct TransferEngineTests {
    static let oddSize = 37 * (1 << 20) + 123   // five 8 MiB parts, the last short and odd

    struct Fixture {
        var store: any ObjectStore
        var root: URL
        var name: String
    }

    /// Runs `body` against each backend in turn.
    func eachBackend(_ body: (Fixture) async throws -> Void) async throws {
        let root = try TestPaths.temporaryDirectory("engine")
        defer { try? FileManager.default.removeItem(at: root) }
        try await body(Fixture(store: try LocalObjectStore(root: root.appendingPathComponent(".store")), root: root, name: "local"))

        try await MotoServer.start(logDirectory: root).stopAfter { moto in
            let s3 = try client(moto)
            try await s3.createBucket("engine")
            try await body(Fixture(store: s3, root: root, name: "moto"))
        }

        if CephGateway.isInstalled || ProcessInfo.processInfo.environment["CI"] != nil {
            try await CephGateway.start().stopAfter { rgw in
                let s3 = try client(rgw)
                try await s3.createBucket("engine")
                try await body(Fixture(store: s3, root: root, name: "ceph-rgw"))
            }
        }
    }

    func client(_ server: any S3TestServer) throws -> S3Client {
        S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: server.endpoint), region: "us-east-1",
                       credentials: AWSCredentials(accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey)))
    }

    func engine(_ store: any ObjectStore, root: URL, defaults: (inout TransferSettings) -> Void = { _ in }) throws -> TransferEngine {
        var configuration = TransferEngine.Configuration()
        defaults(&configuration.defaults)
        return TransferEngine(store: store, dataRoot: try DataRoot(root.path), configuration: configuration,
                              logger: Logger(label: "test.engine"))
    }

    func writeSource(_ root: URL, name: String, size: Int) throws -> (URL, Data) {
        var bytes = Data(count: size)
        bytes.withUnsafeMutableBytes { raw in
            var x: UInt64 = 0x9E37_79B9_7F4A_7C15
            for i in 0..<raw.count { x = x &* 6364136223846793005 &+ 1442695040888963407; raw[i] = UInt8(truncatingIfNeeded: x >> 33) }
        }
        let url = root.appendingPathComponent(name)
        try bytes.write(to: url)
        return (url, bytes)
    }

    func upload(_ source: URL, key: String, id: String) -> TransferJob {
        TransferJob(request: TransferRequest(id: id, op: .upload, bucket: "engine", key: key, source: source.absoluteString),
                    objectKey: key)
    }

    func download(key: String, to target: URL, id: String) -> TransferJob {
        TransferJob(request: TransferRequest(id: id, op: .download, bucket: "engine", key: key, destination: target.absoluteString),
                    objectKey: key)
    }

    @Test func multipartRoundTripIsByteExact() async throws {
        try await eachBackend { f in
            let (source, bytes) = try writeSource(f.root, name: "odd.bin", size: Self.oddSize)
            let counting = CountingStore(f.store)
            let engine = try engine(counting, root: f.root)
            let progress = Mutex<[Int64]>([])
            let up = try await engine.run(upload(source, key: "big/odd.bin", id: "mp-\(f.name)")) { p in
                progress.withLock { $0.append(p.bytesTransferred) }
            }
            #expect(up.eventName == "ObjectCreated:CompleteMultipartUpload", "\(f.name)")
            #expect(up.object.size == Int64(bytes.count))
            #expect(up.object.eTag?.hasSuffix("-5\"") == true, "\(f.name): \(up.object.eTag ?? "")")
            #expect(counting.uploadedParts.withLock { $0.sorted() } == [1, 2, 3, 4, 5])
            #expect(progress.withLock { $0.last } == Int64(bytes.count))

            let target = f.root.appendingPathComponent("out/odd.bin")
            let down = try await engine.run(download(key: "big/odd.bin", to: target, id: "dl-\(f.name)"))
            #expect(down.object.size == Int64(bytes.count))
            #expect(try Data(contentsOf: target) == bytes, "\(f.name)")
            // The first GET spans the multipart threshold (16 MiB: parts 1 and 2), then parts 3, 4 and 5.
            #expect(counting.rangedGets.withLock { $0 } == 4)
            #expect(try FileManager.default.contentsOfDirectory(atPath: target.deletingLastPathComponent().path) == ["odd.bin"])
        }
    }

    @Test func pauseKeepsPartsAndResumeDoesNotResendThem() async throws {
        try await eachBackend { f in
            let (source, bytes) = try writeSource(f.root, name: "pause.bin", size: Self.oddSize)
            let counting = CountingStore(f.store)
            let engine = try engine(counting, root: f.root) { $0.partConcurrency = 1 }
            let control = TransferControl()
            let pausedOnce = Mutex(false)
            // Pause once, when two parts are through.
            let task = Task {
                try await engine.run(upload(source, key: "paused.bin", id: "pause-\(f.name)"), control: control) { p in
                    guard p.bytesTransferred >= 2 * (8 << 20) + 1 else { return }
                    let first = pausedOnce.withLock { done in defer { done = true }; return !done }
                    if first { control.pause() }
                }
            }
            #expect(await eventually(timeout: 60) { control.state == .paused })
            try await Task.sleep(for: .milliseconds(500))   // the part in flight is aborted; no new one starts
            let startedBeforePause = counting.uploadedParts.withLock { $0.count }
            try await Task.sleep(for: .milliseconds(700))
            #expect(counting.uploadedParts.withLock { $0.count } == startedBeforePause, "a part started while paused")

            // The upload is visible in storage with its completed parts; the one in flight at the
            // pause was aborted (or had just finished), never left half-sent.
            let uploads = try await f.store.listMultipartUploads(bucket: "engine", prefix: "paused.bin")
            let inProgress = try #require(uploads.first, "\(f.name): no upload in progress")
            let stored = try await f.store.listParts(ObjectLocation(bucket: "engine", key: "paused.bin"), uploadId: inProgress.uploadId)
            #expect(stored.count >= 2 && stored.count <= startedBeforePause && stored.count < 5, "\(stored.count) of \(startedBeforePause)")

            #expect(control.resume())
            let outcome = try await task.value
            #expect(outcome.object.eTag?.hasSuffix("-5\"") == true)
            // Stored parts are not sent again; only the part the pause aborted is.
            let sent = counting.uploadedParts.withLock { $0.sorted() }
            #expect(Set(sent) == [1, 2, 3, 4, 5] && sent.count == 5 + (startedBeforePause - stored.count), "\(f.name): \(sent)")
            let check = f.root.appendingPathComponent("paused.check")
            _ = try await engine.run(download(key: "paused.bin", to: check, id: "pcheck-\(f.name)"))
            #expect(try Data(contentsOf: check) == bytes)
        }
    }

    @Test func cancelAbortsTheUploadAndRemovesPartialDownloads() async throws {
        try await eachBackend { f in
            let (source, _) = try writeSource(f.root, name: "cancel.bin", size: Self.oddSize)
            let engine = try engine(f.store, root: f.root) { $0.partConcurrency = 2 }
            let control = TransferControl()
            do {
                _ = try await engine.run(upload(source, key: "cancelled.bin", id: "cancel-\(f.name)"), control: control) { p in
                    if p.bytesTransferred > 9 << 20 { control.cancel() }
                }
                Issue.record("a cancelled upload completed")
            } catch let error as FerryError {
                #expect(error.code == .cancelled)
            }
            #expect(try await f.store.listMultipartUploads(bucket: "engine", prefix: "cancelled.bin").isEmpty, "\(f.name)")
            #expect(try await f.store.headObject(bucket: "engine", key: "cancelled.bin") == nil)

            // A download cancelled half-way leaves no file and no temp file.
            _ = try await engine.run(upload(source, key: "whole.bin", id: "whole-\(f.name)"))
            let downloadControl = TransferControl()
            let target = f.root.appendingPathComponent("partial/whole.bin")
            do {
                _ = try await engine.run(download(key: "whole.bin", to: target, id: "dcancel-\(f.name)"), control: downloadControl) { p in
                    if p.bytesTransferred > 9 << 20 { downloadControl.cancel() }
                }
                Issue.record("a cancelled download completed")
            } catch let error as FerryError {
                #expect(error.code == .cancelled)
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: target.deletingLastPathComponent().path).isEmpty)
        }
    }

    @Test func smallObjectsUseOnePutAndOneGetAndDataSources() async throws {
        try await eachBackend { f in
            let counting = CountingStore(f.store)
            let engine = try engine(counting, root: f.root)
            let job = TransferJob(request: TransferRequest(id: "data-\(f.name)", op: .upload, bucket: "engine", key: "hello.txt",
                                                           source: "data:text/plain;base64,\(Data("hello, world".utf8).base64EncodedString())",
                                                           metadata: ["k": "v"]),
                                  objectKey: "hello.txt")
            let up = try await engine.run(job)
            #expect(up.eventName == "ObjectCreated:Put")
            #expect(counting.uploadedParts.withLock { $0.isEmpty })
            let head = try #require(try await f.store.headObject(bucket: "engine", key: "hello.txt"))
            #expect(head.contentType == "text/plain")
            #expect(head.metadata["k"] == "v")
            let target = f.root.appendingPathComponent("hello.out")
            _ = try await engine.run(download(key: "hello.txt", to: target, id: "dsmall-\(f.name)"))
            #expect(try String(contentsOf: target, encoding: .utf8) == "hello, world")

            let empty = f.root.appendingPathComponent("empty.bin")
            try Data().write(to: empty)
            _ = try await engine.run(upload(empty, key: "empty.bin", id: "empty-\(f.name)"))
            let emptyOut = f.root.appendingPathComponent("empty.out")
            let got = try await engine.run(download(key: "empty.bin", to: emptyOut, id: "dempty-\(f.name)"))
            #expect(got.object.size == 0)
            #expect(try Data(contentsOf: emptyOut).isEmpty)
        }
    }

    @Test func copiesAboveTheThresholdUseUploadPartCopy() async throws {
        try await eachBackend { f in
            let (source, bytes) = try writeSource(f.root, name: "copy.bin", size: 12 * (1 << 20) + 5)
            let counting = CountingStore(f.store)
            // A 5 MiB threshold stands in for S3's 5 GiB, so the test stays small.
            let engine = try engine(counting, root: f.root) { $0.copyThreshold = 5 << 20; $0.copyPartSize = 5 << 20 }
            _ = try await engine.run(upload(source, key: "copy/src.bin", id: "csrc-\(f.name)"))
            let copy = TransferJob(request: TransferRequest(id: "copy-\(f.name)", op: .copy, bucket: "engine", key: "copy/dst.bin",
                                                            source: "s3://engine/copy/src.bin"), objectKey: "copy/dst.bin")
            let outcome = try await engine.run(copy)
            #expect(outcome.eventName == "ObjectCreated:CompleteMultipartUpload")
            #expect(outcome.object.size == Int64(bytes.count))
            #expect(counting.copiedParts.withLock { $0.sorted() } == [1, 2, 3], "\(f.name)")
            let target = f.root.appendingPathComponent("copied.bin")
            _ = try await engine.run(download(key: "copy/dst.bin", to: target, id: "cdl-\(f.name)"))
            #expect(try Data(contentsOf: target) == bytes, "\(f.name)")

            // Below the threshold: one CopyObject.
            let small = TransferJob(request: TransferRequest(id: "scopy-\(f.name)", op: .copy, bucket: "engine", key: "copy/small.bin",
                                                             source: "s3://engine/copy/src.bin"), objectKey: "copy/small.bin")
            let plain = try await (try self.engine(counting, root: f.root)).run(small)
            #expect(plain.eventName == "ObjectCreated:Copy")
            #expect(counting.copiedParts.withLock { $0.count } == 3)
        }
    }
}
