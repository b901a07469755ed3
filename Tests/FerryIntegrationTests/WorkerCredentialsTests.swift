import FerryCore
import FerryTestSupport
import Foundation
import Logging
import Testing

/// A worker with no keys of its own: its S3 credentials come from a web
/// identity exchanged with moto's STS. Keys that live 60 s are renewed while
/// a 200 MiB multipart upload runs: parts signed after the renewal carry the
/// new key (seen on the wire by a logging proxy), and the upload completes.
@Suite(.serialized) struct WorkerCredentialsTests {
    let logger = Logger(label: "test.credentials")

    @Test func webIdentityCredentialsAreRenewedDuringAnUpload() async throws {
        let moto = try await MotoServer.start(logDirectory: try TestPaths.temporaryDirectory("wi-moto"))
        let base = try TestPaths.temporaryDirectory("web-identity")
        let proxy = try await FaultProxy.start(upstream: moto.endpoint, rate: 0, logRequests: true, in: base)
        do {
            let env = try EndToEndTests.Environment.oneBroker(base: base, server: moto, bucket: "wid", logger: logger)
            try await Boto3(moto)("create-bucket", "wid")
            let token = base.appendingPathComponent("token")
            try "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6ZmVycnkifQ.sig\n"
                .write(to: token, atomically: true, encoding: .utf8)
            let home = base.appendingPathComponent("home")
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
            // Nothing but the web identity: no keys in the environment, no profiles, no metadata service.
            let noKeys = ["AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
                          "HOME": home.path, "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": "",
                          "AWS_ENDPOINT_URL_STS": moto.endpoint, "AWS_REGION": "us-east-1"]
            func worker(_ name: String, _ environment: [String: String], extra: [String] = []) throws -> BackgroundProcess {
                try WorkerCommandLine(bootstrapServers: env.cluster.bootstrapServers, storage: .s3(endpoint: proxy.endpoint, region: nil),
                                      dataRoot: env.dataRoot, stateDirectory: base.appendingPathComponent("state-\(name)"), extra: extra)
                    .start(name: name, environment: noKeys.merging(environment) { $1 }, logDirectory: base)
            }

            // 1. EKS-style: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN only.
            let first = try worker("irsa", ["AWS_WEB_IDENTITY_TOKEN_FILE": token.path, "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/ferry"])
            let small = env.dataRoot.appendingPathComponent("small.txt")
            try Data("hello from a web identity\n".utf8).write(to: small)
            try await env.kcat.produce(topic: "ferry.requests", key: "wid/small", value: """
                {"id":"wi-small","op":"upload","bucket":"wid","key":"small.txt","source":"\(small.absoluteString)"}
                """)
            let smallStatus = try await env.terminalStatus(of: "wi-small", timeout: 60)
            #expect(smallStatus?.state == .completed, "\(smallStatus?.error?.message ?? "") \(first.log.suffix(2000))")
            #expect(first.log.contains("S3 credentials from web-identity: access key ASIA"), "\(first.log.suffix(2000))")
            await first.stop()

            // 2. A profile whose role keys live 60 s; the upload takes longer (bandwidth cap).
            let config = base.appendingPathComponent("config")
            try """
                [profile ferry]
                role_arn = arn:aws:iam::123456789012:role/ferry
                web_identity_token_file = \(token.path)
                role_session_name = ferry-worker
                duration_seconds = 60
                """.write(to: config, atomically: true, encoding: .utf8)
            let second = try worker("profile", ["AWS_CONFIG_FILE": config.path, "AWS_PROFILE": "ferry"],
                                    extra: ["--bandwidth-limit", "4MiB", "--part-size", "8MiB"])
            let big = env.dataRoot.appendingPathComponent("big.bin")
            _ = FileManager.default.createFile(atPath: big.path, contents: nil)
            let handle = try FileHandle(forWritingTo: big)
            try handle.truncate(atOffset: 200 << 20)
            try handle.close()
            try await env.kcat.produce(topic: "ferry.requests", key: "wid/big", value: """
                {"id":"wi-big","op":"upload","bucket":"wid","key":"big.bin","source":"\(big.absoluteString)"}
                """)
            let bigStatus = try await env.terminalStatus(of: "wi-big", timeout: 240)
            #expect(bigStatus?.state == .completed, "\(bigStatus?.error?.message ?? "") \(second.log.suffix(3000))")
            #expect(bigStatus?.object?.size == 200 << 20)
            let signers = proxy.injected.filter { $0.hasPrefix("signed-by ") && $0.contains("/wid/public/big.bin?") && $0.contains("partNumber=") }
                .map { String($0.split(separator: " ")[1]) }
            let keys = Set(signers)
            #expect(signers.count == 25, "\(signers.count) parts seen")
            #expect(keys.count >= 2 && keys.allSatisfy { $0.hasPrefix("ASIA") }, "parts signed by \(keys.sorted())")
            // Renewed, not fetched per request: a handful of keys for 25 parts over ~50 s.
            #expect(keys.count <= 4, "\(keys.count) keys")
            let renewals = second.log.components(separatedBy: "credentials from profile ferry (web identity): access key").count - 1
            #expect(renewals >= 2, "\(second.log.suffix(3000))")
            print("web identity: 200 MiB upload in 25 parts signed by \(keys.count) successive temporary keys (60 s each); \(renewals) renewals")
            await second.stop()
        } catch {
            await proxy.process.stop(); await moto.stop()
            throw error
        }
        await proxy.process.stop()
        await moto.stop()
        try? FileManager.default.removeItem(at: base)
    }
}
