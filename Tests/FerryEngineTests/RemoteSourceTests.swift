import FerryCore
import FerryEngine
import FerryS3
import FerryLocalStore
import FerryStorage
import FerryTestSupport
import Foundation
import Logging
import Testing

@Suite struct AddressPolicyTests {
    @Test(arguments: [
        ("127.0.0.1", true), ("10.1.2.3", true), ("172.16.0.1", true), ("172.31.255.255", true), ("172.32.0.1", false),
        ("192.168.1.1", true), ("169.254.169.254", true), ("100.64.0.1", true), ("0.0.0.0", true), ("224.0.0.1", true),
        ("8.8.8.8", false), ("52.216.0.1", false), ("::1", true), ("::", true), ("fe80::1", true), ("fd00::1", true),
        ("::ffff:127.0.0.1", true), ("::ffff:8.8.8.8", false), ("64:ff9b::a9fe:a9fe", true), ("2606:4700::1111", false),
    ])
    func internalAddresses(text: String, isInternal: Bool) throws {
        let bytes = try #require(AddressRange.parse(text))
        #expect(RemoteSourcePolicy.isInternal(bytes) == isInternal, "\(text)")
    }

    @Test func exceptionsAndHosts() throws {
        var policy = RemoteSourcePolicy()
        #expect(!policy.permits(AddressRange.parse("127.0.0.1")!))
        policy.allowedRanges = [try AddressRange("127.0.0.0/8")]
        #expect(policy.permits(AddressRange.parse("127.0.0.1")!))
        #expect(!policy.permits(AddressRange.parse("169.254.169.254")!))
        #expect(policy.refusal(of: "http://example.com/x", what: "source")?.code == .forbiddenSource)
        policy.allowedHosts = [".example.com"]
        #expect(policy.refusal(of: "https://cdn.example.com/x", what: "source") == nil)
        #expect(policy.refusal(of: "https://example.com.evil.net/x", what: "source")?.code == .forbiddenSource)
        // A host read one way by Foundation and another by curl, or written other than plainly, is refused.
        #expect(policy.refusal(of: "https://x.example.com%00.evil.net/x", what: "source")?.code == .forbiddenSource)
        #expect(policy.refusal(of: "https://x.example.com;.evil.net/x", what: "source")?.code == .forbiddenSource)
        #expect(policy.refusal(of: "https://x%2eexample.com/x", what: "source")?.code == .forbiddenSource)
        #expect(policy.refusal(of: "https://evil\u{3002}x.example.com/x", what: "source")?.code == .forbiddenSource)
        #expect(throws: ConfigurationError.self) { try AddressRange("300.1.1.1/8") }
    }
}

/// `https://` (and, in tests, `http://`) sources through the SSRF guard, against
/// a server on loopback that also redirects.
@Suite(.serialized) struct RemoteSourceTests {
    func engine(_ root: URL, store: any ObjectStore, policy: RemoteSourcePolicy?, caBundle: String? = nil) throws -> TransferEngine {
        var configuration = TransferEngine.Configuration()
        configuration.remoteSources = policy.map { RemoteSourceFetcher(policy: $0, transport: CurlTransport(caBundle: caBundle)) }
        return TransferEngine(store: store, dataRoot: try DataRoot(root.path), configuration: configuration,
                              logger: Logger(label: "test.remote"))
    }

    func job(_ id: String, source: String) -> TransferJob {
        TransferJob(request: TransferRequest(id: id, op: .upload, bucket: "remote", key: "\(id).bin", source: source), objectKey: "\(id).bin")
    }

    @Test func guardRefusesInternalAddressesRedirectsAndOversizedSources() async throws {
        let root = try TestPaths.temporaryDirectory("remote")
        defer { try? FileManager.default.removeItem(at: root) }
        let served = root.appendingPathComponent("served")
        try FileManager.default.createDirectory(at: served, withIntermediateDirectories: true)
        let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        try bytes.write(to: served.appendingPathComponent("file.bin"))
        let log = root.appendingPathComponent("requests.log")
        let server = try BackgroundProcess(name: "source", executable: "python3",
                                           arguments: [TestPaths.python.appendingPathComponent("source_server.py").path,
                                                       "0", served.path, log.path], logDirectory: root)
        defer { Task { await server.stop() } }
        let base = "http://127.0.0.1:\(try await server.announcedPort(after: "listening on 127.0.0.1:"))"
        #expect(await eventually(timeout: 20) { await httpAnswers("\(base)/file.bin") })
        try? FileManager.default.removeItem(at: log)
        let store = try LocalObjectStore(root: root.appendingPathComponent(".store"))
        func code(_ engine: TransferEngine, _ id: String, _ source: String) async -> String {
            do { _ = try await engine.run(job(id, source: source)); return "ok" } catch { return error.code.rawValue }
        }

        // Off by default.
        #expect(await code(try engine(root, store: store, policy: nil), "off", "\(base)/file.bin") == "ForbiddenSource")
        var policy = RemoteSourcePolicy()
        policy.schemes = ["http", "https"]
        // Loopback refused at connect time: the server sees no request.
        #expect(await code(try engine(root, store: store, policy: policy), "loop", "\(base)/file.bin") == "ForbiddenSource")
        #expect(!FileManager.default.fileExists(atPath: log.path))

        policy.allowedRanges = [try AddressRange("127.0.0.0/8")]
        let permissive = try engine(root, store: store, policy: policy)
        #expect(await code(permissive, "fetched", "\(base)/file.bin") == "ok")
        let out = root.appendingPathComponent("check.bin")
        let fd = open(out.path, O_RDWR | O_CREAT, 0o644)
        _ = try await store.getObject(bucket: "remote", key: "fetched.bin", into: fd)
        close(fd)
        #expect(try Data(contentsOf: out) == bytes)
        // A redirect to the cloud metadata address is refused on its hop.
        #expect(await code(permissive, "meta", "\(base)/redirect?to=http://169.254.169.254/latest/meta-data/") == "ForbiddenSource")
        // A redirect that stays allowed is followed.
        #expect(await code(permissive, "hop", "\(base)/redirect?to=\(base)/file.bin") == "ok")
        // Hosts outside the allow-list, and sources over the size cap.
        var hosts = policy
        hosts.allowedHosts = ["downloads.example.com"]
        #expect(await code(try engine(root, store: store, policy: hosts), "host", "\(base)/file.bin") == "ForbiddenSource")
        var small = policy
        small.maxBytes = 1000
        #expect(await code(try engine(root, store: store, policy: small), "big", "\(base)/file.bin") == "SourceTooLarge")
        // No temp files left behind.
        let leftovers = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(".ferry-fetch").path)) ?? []
        #expect(leftovers.isEmpty)
    }

    /// The case the feature is for: a presigned GET, over TLS, from a real S3 server.
    @Test(.enabled(if: CephGateway.isInstalled || ProcessInfo.processInfo.environment["CI"] != nil))
    func presignedHTTPSGetIsAnUploadSource() async throws {
        try await CephGateway.start(https: true).stopAfter { rgw in
            let root = try TestPaths.temporaryDirectory("remote-tls")
            defer { try? FileManager.default.removeItem(at: root) }
            let https = try #require(rgw.httpsEndpoint)
            let tls = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: https), region: "us-east-1",
                                     credentials: .init(accessKeyId: rgw.accessKeyId, secretAccessKey: rgw.secretAccessKey),
                                     caBundle: rgw.caBundle))
            try await tls.createBucket("remote")
            let bytes = (0..<(7 << 20)).map { UInt8(truncatingIfNeeded: $0 >> 3) }
            _ = try await tls.putObject(PutObjectInput(bucket: "remote", key: "origin.bin"), body: .bytes(bytes))
            let url = try await tls.presignedURL(method: "GET", location: ObjectLocation(bucket: "remote", key: "origin.bin"), expires: 300)
            var policy = RemoteSourcePolicy()
            policy.allowedRanges = [try AddressRange("127.0.0.0/8")]
            let engine = try engine(root, store: tls, policy: policy, caBundle: rgw.caBundle)
            let outcome = try await engine.run(job("from-presigned", source: url))
            #expect(outcome.object.size == Int64(bytes.count))
            let out = root.appendingPathComponent("copy.bin")
            let fd = open(out.path, O_RDWR | O_CREAT, 0o644)
            _ = try await tls.getObject(bucket: "remote", key: "from-presigned.bin", into: fd)
            close(fd)
            #expect(try Data(contentsOf: out) == Data(bytes))
        }
    }
}
