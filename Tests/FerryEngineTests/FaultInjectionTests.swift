import FerryCore
import FerryEngine
import FerryS3
import FerryStorage
import FerryTestSupport
import Foundation
import Logging
import Synchronization
import Testing

extension FaultProxy {
    func client() throws -> S3Client {
        S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: endpoint), region: "us-east-1",
                       credentials: .init(accessKeyId: "testing", secretAccessKey: "testing")))
    }
}

/// Retries against a proxy that answers 503 SlowDown or resets the connection
/// for a fifth of all requests: the results must still be byte-exact.
@Suite(.serialized) struct FaultInjectionTests {
    @Test func transfersSurvive503sAndResets() async throws {
        let root = try TestPaths.temporaryDirectory("faults")
        defer { try? FileManager.default.removeItem(at: root) }
        let moto = try await MotoServer.start(logDirectory: root)
        let proxy = try await FaultProxy.start(upstream: moto.endpoint, rate: 0.2, in: root)
        defer { Task { await proxy.process.stop(); await moto.stop() } }
        // Create the bucket directly, so only the transfers meet faults.
        try await S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: moto.endpoint), region: "us-east-1",
                                 credentials: .init(accessKeyId: "testing", secretAccessKey: "testing"))).createBucket("faults")

        let counting = CountingStore(try proxy.client())
        var configuration = TransferEngine.Configuration()
        configuration.defaults.retryPolicy = RetryPolicy(retryLimit: 8, baseDelaySeconds: 0.01, maxDelaySeconds: 0.2)
        let engine = TransferEngine(store: counting, dataRoot: try DataRoot(root.path), configuration: configuration,
                                    logger: Logger(label: "test.faults"))

        var bytes = Data(count: 21 * (1 << 20) + 7)
        bytes.withUnsafeMutableBytes { raw in for i in 0..<raw.count { raw[i] = UInt8(truncatingIfNeeded: i &* 131 &+ i >> 9) } }
        let source = root.appendingPathComponent("src.bin")
        try bytes.write(to: source)
        for round in 0..<3 {
            let key = "retry-\(round).bin"
            // Progress never counts a retried request twice: it ends at the size and never passes it.
            let seen = Mutex((last: Int64(0), max: Int64(0)))
            _ = try await engine.run(TransferJob(request: TransferRequest(id: "fu\(round)", op: .upload, bucket: "faults", key: key,
                                                                          source: source.absoluteString), objectKey: key)) { p in
                seen.withLock { $0 = (p.bytesTransferred, Swift.max($0.max, p.bytesTransferred)) }
            }
            #expect(seen.withLock { $0.last } == Int64(bytes.count), "round \(round)")
            #expect(seen.withLock { $0.max } <= Int64(bytes.count), "round \(round)")
            let target = root.appendingPathComponent("out-\(round).bin")
            _ = try await engine.run(TransferJob(request: TransferRequest(id: "fd\(round)", op: .download, bucket: "faults", key: key,
                                                                          destination: target.absoluteString), objectKey: key))
            #expect(try Data(contentsOf: target) == bytes, "round \(round)")
        }
        let injected = proxy.injected
        let partRequests = counting.uploadedParts.withLock { $0.count }
        print("fault injection: \(injected.filter { $0 == "503" }.count) × 503, \(injected.filter { $0 == "reset" }.count) resets; "
              + "\(partRequests) part uploads for 9 parts")
        #expect(injected.count > 0)
        // Each retried part shows up as an extra part request.
        #expect(partRequests > 9)
    }

    /// Bodies damaged in transit fail the stored checksum (and the MD5 ETag) and
    /// are fetched again: a corrupt download is never accepted. Without a stored
    /// checksum (as on Ceph RGW 16) the MD5 alone, computed in `MD5Lanes` from
    /// the file, catches them.
    @Test(arguments: [ChecksumAlgorithm.crc32c, nil])
    func corruptedDownloadsAreRetriedNotAccepted(stored: ChecksumAlgorithm?) async throws {
        let root = try TestPaths.temporaryDirectory("corrupt")
        defer { try? FileManager.default.removeItem(at: root) }
        let moto = try await MotoServer.start(logDirectory: root)
        let proxy = try await FaultProxy.start(upstream: moto.endpoint, rate: 0, corruptGets: 2, in: root)
        defer { Task { await proxy.process.stop(); await moto.stop() } }
        let direct = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: moto.endpoint), region: "us-east-1",
                                    credentials: .init(accessKeyId: "testing", secretAccessKey: "testing")))
        try await direct.createBucket("corrupt")
        let bytes = (0..<2_000_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        _ = try await direct.putObject(PutObjectInput(bucket: "corrupt", key: "obj", checksum: stored), body: .bytes(bytes))
        #expect(try await direct.headObject(bucket: "corrupt", key: "obj", headers: [:])?.eTag?.count == 34)  // quoted MD5

        let proxied = try proxy.client()
        var configuration = TransferEngine.Configuration()
        configuration.defaults.retryPolicy = RetryPolicy(retryLimit: 4, baseDelaySeconds: 0.01)
        let engine = TransferEngine(store: proxied, dataRoot: try DataRoot(root.path), configuration: configuration,
                                    logger: Logger(label: "test.corrupt"))
        let target = root.appendingPathComponent("obj.out")
        _ = try await engine.run(TransferJob(request: TransferRequest(id: "c1", op: .download, bucket: "corrupt", key: "obj",
                                                                      destination: target.absoluteString), objectKey: "obj"))
        #expect(try Data(contentsOf: target) == Data(bytes))
        #expect(proxy.injected.filter { $0 == "corrupt" }.count == 2)
        // The refetches stepped aside and took their slot back: all given back now.
        #expect(engine.inFlight == 0 && engine.finishing == 0)

        // With every body damaged, retries run out: an error, not a file.
        let spoiler = try await FaultProxy.start(upstream: moto.endpoint, rate: 0, corruptGets: 100, name: "proxy2", in: root)
        defer { Task { await spoiler.process.stop() } }
        let alwaysBad = TransferEngine(store: try spoiler.client(), dataRoot: try DataRoot(root.path), logger: Logger(label: "test.corrupt"))
        let badTarget = root.appendingPathComponent("bad.out")
        do {
            _ = try await alwaysBad.run(TransferJob(request: TransferRequest(id: "c2", op: .download, bucket: "corrupt", key: "obj",
                                                                             destination: badTarget.absoluteString,
                                                                             options: TransferOptions(retryLimit: 1)), objectKey: "obj"))
            Issue.record("a corrupt body was accepted")
        } catch {
            #expect(error.code == .badDigest)
            #expect(error.message.contains(stored == nil ? "MD5" : "CRC32C"), "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: badTarget.path))
    }
}

extension FaultInjectionTests {
    /// A multipart upload with a CRC (CRC-32C by default, or CRC-32) keeps a
    /// CRC of the whole object (`FULL_OBJECT`), which moto computes from the
    /// bytes as Ferry did from the parts' CRCs, and boto3 reads as such; a
    /// download of it checks that CRC by combining its ranges' CRCs as they
    /// stream (the first span's too for a CRC-32C, which it computes before it
    /// knows; for a CRC-32 that span is read back), so a byte damaged in a
    /// later range (which a composite checksum left unchecked) is fetched
    /// again, and with every later range damaged the download fails, never
    /// delivers the file.
    @Test(arguments: [ChecksumAlgorithm.crc32c, .crc32])
    func aByteDamagedInALaterRangeOfAMultipartObjectIsFetchedAgain(algorithm: ChecksumAlgorithm) async throws {
        let root = try TestPaths.temporaryDirectory("whole-crc")
        defer { try? FileManager.default.removeItem(at: root) }
        try await MotoServer.start(logDirectory: root).stopAfter { moto in
            let direct = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: moto.endpoint), region: "us-east-1",
                                        credentials: .init(accessKeyId: "testing", secretAccessKey: "testing")))
            try await direct.createBucket("whole")
            var bytes = Data(count: 21 * (1 << 20) + 7)
            bytes.withUnsafeMutableBytes { raw in for i in 0..<raw.count { raw[i] = UInt8(truncatingIfNeeded: i &* 167 &+ i >> 11) } }
            let source = root.appendingPathComponent("big.bin")
            try bytes.write(to: source)
            // Uploaded through a proxy that logs what the completion carried.
            let recorder = try await FaultProxy.start(upstream: moto.endpoint, rate: 0, logRequests: true, name: "recorder", in: root)
            let uploader = TransferEngine(store: try recorder.client(), dataRoot: try DataRoot(root.path), logger: Logger(label: "test.whole"))
            _ = try await uploader.run(TransferJob(request: TransferRequest(id: "wu", op: .upload, bucket: "whole", key: "big",
                                                                            source: source.absoluteString,
                                                                            options: TransferOptions(checksumAlgorithm: algorithm.rawValue)),
                                                   objectKey: "big"))
            var hasher = algorithm.makeHasher()
            bytes.withUnsafeBytes { hasher.update($0) }
            // The completion named the whole file's CRC, made from the parts' CRCs.
            let completions = recorder.injected.filter { $0.hasPrefix("checksums POST ") && $0.contains("uploadId=") }
            #expect(completions.count == 1 && completions[0].hasSuffix(
                " \(algorithm.headerName)=\(hasher.finish()) x-amz-checksum-type=FULL_OBJECT"), "\(completions)")
            await recorder.process.stop()
            let script = """
                import boto3, sys
                s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1")
                h = s3.head_object(Bucket="whole", Key="big", ChecksumMode="ENABLED")
                print(h.get("Checksum" + sys.argv[2], "missing"), h.get("ChecksumType", "missing"), h["ETag"])
                """
            let fields = try await runChecked("python3", ["-c", script, moto.endpoint, algorithm.rawValue], environment: moto.clientEnvironment)
                .split(whereSeparator: \.isWhitespace).map(String.init)
            #expect(fields.count == 3 && fields[0] == hasher.finish() && fields[1] == "FULL_OBJECT", "boto3 read \(fields)")
            #expect(fields.last?.hasSuffix("-3\"") == true, "three parts: \(fields)")

            // One later range damaged: fetched again, the file exact.
            let proxy = try await FaultProxy.start(upstream: moto.endpoint, rate: 0, corruptGets: 1, laterRangesOnly: true, in: root)
            var configuration = TransferEngine.Configuration()
            configuration.defaults.retryPolicy = RetryPolicy(retryLimit: 3, baseDelaySeconds: 0.01)
            let log = RecordedLog()
            let engine = TransferEngine(store: try proxy.client(), dataRoot: try DataRoot(root.path), configuration: configuration,
                                        logger: log.logger(label: "test.whole"))
            let target = root.appendingPathComponent("big.out")
            let outcome = try await engine.run(TransferJob(request: TransferRequest(id: "wd1", op: .download, bucket: "whole", key: "big",
                                                                                    destination: target.absoluteString), objectKey: "big"))
            #expect(try Data(contentsOf: target) == bytes)
            #expect(proxy.injected.filter { $0 == "corrupt" }.count == 1)
            #expect(outcome.attempts == 2, "the damaged download was fetched once more")
            // Checked without a second pass: the first span's CRC and the later range's, combined.
            let checks = log.take().filter { $0.contains("of the whole object checked") }
            let expected = algorithm == .crc32c ? "2 ranges' CRCs combined, 0 bytes read back" : "1 ranges' CRCs combined, 16777216 bytes read back"
            #expect(checks == ["debug \(algorithm.rawValue) of the whole object checked: \(expected) from the file"], "\(checks)")
            await proxy.process.stop()

            // Every later range damaged: BadDigest, no file.
            let spoiler = try await FaultProxy.start(upstream: moto.endpoint, rate: 0, corruptGets: 100, laterRangesOnly: true,
                                                     name: "proxy2", in: root)
            let alwaysBad = TransferEngine(store: try spoiler.client(), dataRoot: try DataRoot(root.path), configuration: configuration,
                                           logger: Logger(label: "test.whole"))
            let badTarget = root.appendingPathComponent("bad.out")
            do throws(FerryError) {
                _ = try await alwaysBad.run(TransferJob(request: TransferRequest(id: "wd2", op: .download, bucket: "whole", key: "big",
                                                                                 destination: badTarget.absoluteString,
                                                                                 options: TransferOptions(retryLimit: 1)), objectKey: "big"))
                Issue.record("a damaged multipart download was accepted")
            } catch {
                #expect(error.code == .badDigest)
                #expect(error.message.contains("have \(algorithm.rawValue) "), "\(error)")
            }
            #expect(!FileManager.default.fileExists(atPath: badTarget.path))
            await spoiler.process.stop()
        }
    }
}

/// `timeoutSeconds` bounds a whole transfer; allow-listed headers reach storage.
@Suite(.serialized) struct TransferLimitTests {
    @Test func aTimedOutUploadIsAbortedAndHeadersArrive() async throws {
        let root = try TestPaths.temporaryDirectory("limits")
        defer { try? FileManager.default.removeItem(at: root) }
        try await MotoServer.start(logDirectory: root).stopAfter { moto in
            // 1 MiB/s: a 40 MiB multipart upload needs about forty seconds uncut, so a
            // bound well under that shows the 2 s timeout cut it, with room for a loaded machine.
            let slow = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: moto.endpoint), region: "us-east-1",
                                      credentials: .init(accessKeyId: "testing", secretAccessKey: "testing"),
                                      limits: .init(bandwidthBytesPerSecond: 1 << 20)))
            try await slow.createBucket("limits")
            let engine = TransferEngine(store: slow, dataRoot: try DataRoot(root.path), logger: Logger(label: "test.limits"))
            let source = root.appendingPathComponent("slow.bin")
            try Data(count: 40 << 20).write(to: source)
            let started = Date()
            do throws(FerryError) {
                _ = try await engine.run(TransferJob(request: TransferRequest(id: "slow", op: .upload, bucket: "limits", key: "slow.bin",
                                                                              source: source.absoluteString,
                                                                              options: TransferOptions(timeoutSeconds: 2)), objectKey: "slow.bin"))
                Issue.record("a transfer outlived its timeout")
            } catch {
                #expect(error.code == .timedOut, "\(error)")
            }
            #expect(Date().timeIntervalSince(started) < 25)  // uncut: about 40 s; 16 s was seen beside a ThreadSanitizer run
            #expect(try await slow.listMultipartUploads(bucket: "limits", prefix: "slow.bin").isEmpty)

            let small = root.appendingPathComponent("page.html")
            try Data("<p>hi</p>".utf8).write(to: small)
            _ = try await engine.run(TransferJob(request: TransferRequest(
                id: "hdr", op: .upload, bucket: "limits", key: "page.html", source: small.absoluteString,
                headers: ["Cache-Control": "max-age=60", "Content-Disposition": "attachment; filename=\"p.html\"",
                          "x-amz-storage-class": "STANDARD_IA"]), objectKey: "page.html"))
            let script = """
                import boto3, json, sys
                r = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1").head_object(Bucket="limits", Key="page.html")
                print(json.dumps({k: r.get(k) for k in ["CacheControl", "ContentDisposition", "StorageClass", "ContentType"]}))
                """
            let head = try await runChecked("python3", ["-c", script, moto.endpoint], environment: moto.clientEnvironment)
            let fields = try JSONSerialization.jsonObject(with: Data(head.utf8)) as! [String: Any]
            #expect(fields["CacheControl"] as? String == "max-age=60")
            #expect(fields["ContentDisposition"] as? String == "attachment; filename=\"p.html\"")
            #expect(fields["StorageClass"] as? String == "STANDARD_IA")
            #expect(fields["ContentType"] as? String == "text/html")
        }
    }
}
