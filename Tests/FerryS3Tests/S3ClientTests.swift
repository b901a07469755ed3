import FerryCore
import FerryS3
import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// The S3 client against real servers: moto, and Ceph's RADOS Gateway, which
/// checks signatures and Content-MD5 for real.
@Suite(.serialized) struct S3ClientTests {
    func client(_ server: any S3TestServer, secret: String? = nil) throws -> S3Client {
        S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: server.endpoint), region: "us-east-1",
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

        let copied = try await s3.copyObject(CopyObjectInput(source: ObjectLocation(bucket: "ferry-client", key: key),
                                                             destination: PutObjectInput(bucket: "ferry-client", key: "copy")))
        #expect(copied.eTag == put.eTag)

        #expect(try await s3.headObject(bucket: "ferry-client", key: key)?.size == Int64(bytes.count))
        _ = try await s3.deleteObject(bucket: "ferry-client", key: key)
        #expect(try await s3.headObject(bucket: "ferry-client", key: key) == nil)
        await #expect(throws: FerryError.self) { _ = try await s3.getObject(bucket: "ferry-client", key: key, into: ofd) }
    }

    @Test func againstMoto() async throws {
        let logs = try TestPaths.temporaryDirectory("moto")
        try await MotoServer.start(logDirectory: logs).stopAfter { moto in
            try await exercise(moto)
        }
    }

    @Test(.enabled(if: CephGateway.isInstalled || ProcessInfo.processInfo.environment["CI"] != nil))
    func againstCephGateway() async throws {
        try await CephGateway.start().stopAfter { rgw in
            try await exercise(rgw)
            // A wrong secret is refused: the server really checks signatures.
            let forged = try client(rgw, secret: "not-the-secret-0000000000000000000000000")
            do throws(FerryError) {
                _ = try await forged.headObject(bucket: "ferry-client", key: "copy")
                Issue.record("a request signed with the wrong secret was accepted")
            } catch {
                #expect(error.code == .accessDenied)
            }
        }
    }
}

/// Presigned URLs from `ferry presign`, used with curl against a server that checks them.
@Suite(.serialized) struct PresignTests {
    @Test(.enabled(if: CephGateway.isInstalled || ProcessInfo.processInfo.environment["CI"] != nil))
    func presignedGetAndPutWorkWithCurl() async throws {
        try await CephGateway.start().stopAfter { rgw in
            let dir = try TestPaths.temporaryDirectory("presign")
            try await Boto3(rgw)("create-bucket", "presign")
            let env = rgw.clientEnvironment
            let ferry = TestPaths.ferryBinary
            let body = dir.appendingPathComponent("in.txt")
            try Data("presigned hello\n".utf8).write(to: body)

            let putURL = try await runChecked(ferry, ["presign", "put", "s3://presign/dir/a b.txt", "--expires", "600",
                                                      "--content-type", "text/plain"], environment: env)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            try await runChecked("curl", ["-fsS", "-T", body.path, "-H", "Content-Type: text/plain", putURL])

            let getURL = try await runChecked(ferry, ["presign", "get", "s3://presign/dir/a b.txt"], environment: env)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try await runChecked("curl", ["-fsS", getURL]) == "presigned hello\n")
            let head = try await Boto3(rgw).get(bucket: "presign", key: "dir/a b.txt", to: dir.appendingPathComponent("b3"))
            #expect(head.ContentType == "text/plain")

            // A tampered URL is refused by the server.
            let tampered = getURL.replacingOccurrences(of: "X-Amz-Expires=3600", with: "X-Amz-Expires=3601")
            let refused = try await runCommand("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", tampered])
            #expect(refused.stdout == "403")
            // So is one past its expiry.
            let shortURL = try await runChecked(ferry, ["presign", "get", "s3://presign/dir/a b.txt", "--expires", "1"],
                                                environment: env).trimmingCharacters(in: .whitespacesAndNewlines)
            try await Task.sleep(for: .seconds(2.5))
            let expired = try await runCommand("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", shortURL])
            #expect(expired.stdout == "403")
            // Bad input: a clear error and a non-zero exit.
            let tooLong = try await runCommand(ferry, ["presign", "get", "s3://presign/x", "--expires", "604801"], environment: env)
            #expect(tooLong.status != 0)
            #expect(tooLong.stderr.contains("7 days"))
        }
    }
}
