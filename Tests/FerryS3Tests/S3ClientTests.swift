import FerryCore
import FerryS3
import FerryTestSupport
import Foundation
import Testing

/// The S3 client against real servers: moto, and Ceph's RADOS Gateway, which
/// checks signatures and Content-MD5 for real.
@Suite(.serialized) struct S3ClientTests {
    func client(_ server: any S3TestServer, secret: String? = nil) throws -> S3Client {
        S3Client(.init(endpoint: try S3Endpoint(url: server.endpoint), region: "us-east-1",
                       credentials: AWSCredentials(accessKeyId: server.accessKeyId,
                                                   secretAccessKey: secret ?? server.secretAccessKey)))
    }

    func exercise(_ server: any S3TestServer) async throws {
        let s3 = try client(server)
        try await s3.createBucket("ferry-client")
        let dir = try TestPaths.temporaryDirectory("s3client")
        defer { try? FileManager.default.removeItem(at: dir) }
        let key = "dir/a b+ü&=.bin"
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let put = try await s3.putObject(PutObjectInput(bucket: "ferry-client", key: key, contentType: "application/x-test",
                                                        metadata: ["owner": "alice"]), body: .bytes(bytes))
        #expect(put.eTag == "\"\(Digest.md5(bytes).hexString)\"")

        // boto3 reads back what Ferry wrote.
        let readBack = dir.appendingPathComponent("boto3.bin")
        let head = try await Boto3(server).get(bucket: "ferry-client", key: key, to: readBack)
        #expect(try Data(contentsOf: readBack) == Data(bytes))
        #expect(head.ContentType == "application/x-test")
        #expect(head.Metadata == ["owner": "alice"])

        // Ferry reads back into a file, from a file source too.
        let source = dir.appendingPathComponent("src.bin")
        try Data(bytes.reversed()).write(to: source)
        let sfd = open(source.path, O_RDONLY)
        defer { close(sfd) }
        _ = try await s3.putObject(PutObjectInput(bucket: "ferry-client", key: "file-source"), body: .file(descriptor: sfd, offset: 0, length: Int64(bytes.count)))
        let out = dir.appendingPathComponent("out.bin")
        let ofd = open(out.path, O_RDWR | O_CREAT, 0o644)
        defer { close(ofd) }
        let attributes = try await s3.getObject(bucket: "ferry-client", key: "file-source", into: ofd)
        #expect(attributes.size == Int64(bytes.count))
        #expect(try Data(contentsOf: out) == Data(bytes.reversed()))

        let copied = try await s3.copyObject(from: ObjectLocation(bucket: "ferry-client", key: key),
                                             to: ObjectLocation(bucket: "ferry-client", key: "copy"))
        #expect(copied.eTag == put.eTag)

        #expect(try await s3.headObject(bucket: "ferry-client", key: key)?.size == Int64(bytes.count))
        _ = try await s3.deleteObject(bucket: "ferry-client", key: key)
        #expect(try await s3.headObject(bucket: "ferry-client", key: key) == nil)
        await #expect(throws: FerryError.self) { _ = try await s3.getObject(bucket: "ferry-client", key: key, into: ofd) }
    }

    @Test func againstMoto() async throws {
        let logs = try TestPaths.temporaryDirectory("moto")
        let moto = try await MotoServer.start(logDirectory: logs)
        defer { Task { await moto.stop() } }
        try await exercise(moto)
    }

    @Test(.enabled(if: CephGateway.isInstalled || ProcessInfo.processInfo.environment["CI"] != nil))
    func againstCephGateway() async throws {
        let rgw = try await CephGateway.start()
        do {
            try await exercise(rgw)
            // A wrong secret is refused: the server really checks signatures.
            let forged = try client(rgw, secret: "not-the-secret-0000000000000000000000000")
            do {
                _ = try await forged.headObject(bucket: "ferry-client", key: "copy")
                Issue.record("a request signed with the wrong secret was accepted")
            } catch {
                #expect(error.code == .accessDenied)
            }
        } catch {
            await rgw.stop()
            throw error
        }
        await rgw.stop()
    }
}
