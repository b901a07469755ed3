import FerryCore
@testable import FerryLocalStore
@testable import FerryS3
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Synchronization
import Testing

/// Ferry's own AWS credentials, found as AWS SDKs find them, against real
/// peers: moto's STS, a loopback server that follows AWS's IMDSv2 and
/// container-credentials protocols, and a credential_process script.
@Suite(.serialized) struct CredentialChainTests {
    /// An environment with nothing of the machine's in it: no keys, no profiles, no metadata service.
    func isolated(_ home: URL, _ extra: [String: String] = [:]) -> [String: String] {
        ["HOME": home.path, "AWS_EC2_METADATA_DISABLED": "true"].merging(extra) { $1 }
    }

    func chain(_ environment: [String: String]) -> CredentialChain {
        CredentialChain(environment: environment, region: "us-east-1", transport: CurlTransport(limits: .init(maxConnections: 4)))
    }

    @Test func staticSourcesComeFirstInTheSDKsOrder() async throws {
        let home = try TestPaths.temporaryDirectory("creds-home")
        defer { try? FileManager.default.removeItem(at: home) }
        try FileManager.default.createDirectory(at: home.appendingPathComponent(".aws"), withIntermediateDirectories: true)
        try """
            [default]
            aws_access_key_id = AKIDEFAULT
            aws_secret_access_key = default-secret
            [dev]
            aws_access_key_id = AKIDEV
            aws_secret_access_key = dev-secret
            """.write(to: home.appendingPathComponent(".aws/credentials"), atomically: true, encoding: .utf8)
        let explicit = try chain(isolated(home, ["AWS_ACCESS_KEY_ID": "AKIENV", "AWS_SECRET_ACCESS_KEY": "s"]))
            .provider(explicit: (AWSCredentials(accessKeyId: "AKIFLAG", secretAccessKey: "f"), "static keys (flags)"))
        #expect(try await explicit.credentials().accessKeyId == "AKIFLAG")
        let env = try chain(isolated(home, ["AWS_ACCESS_KEY_ID": "AKIENV", "AWS_SECRET_ACCESS_KEY": "s"])).provider()
        #expect(env.source == "environment")
        #expect(try await env.credentials().accessKeyId == "AKIENV")
        let profileDefault = try chain(isolated(home)).provider()
        #expect(profileDefault.source == "profile default")
        #expect(try await profileDefault.credentials().accessKeyId == "AKIDEFAULT")
        let named = try chain(isolated(home, ["AWS_PROFILE": "dev"])).provider()
        #expect(try await named.credentials().accessKeyId == "AKIDEV")
        #expect(throws: FerryError.self) { try chain(isolated(home)).provider(profile: "missing") }
        // Nothing at all: an error that says what was looked at.
        let empty = try TestPaths.temporaryDirectory("creds-empty")
        defer { try? FileManager.default.removeItem(at: empty) }
        #expect(throws: FerryError.self) { try chain(isolated(empty)).provider() }
    }

    @Test func credentialProcessAndProfileMistakes() async throws {
        let home = try TestPaths.temporaryDirectory("creds-process")
        defer { try? FileManager.default.removeItem(at: home) }
        let script = home.appendingPathComponent("issue.sh")
        let expiry = Timestamp.iso8601(Date().addingTimeInterval(3600))
        try """
            #!/bin/sh
            echo '{"Version": 1, "AccessKeyId": "ASIAPROCESS", "SecretAccessKey": "p", "SessionToken": "t", "Expiration": "\(expiry)"}'
            """.write(to: script, atomically: true, encoding: .utf8)
        chmod(script.path, 0o755)
        let config = home.appendingPathComponent("config")
        try """
            [profile tool]
            credential_process = \(script.path)
            [profile loop-a]
            role_arn = arn:aws:iam::123456789012:role/a
            source_profile = loop-b
            [profile loop-b]
            role_arn = arn:aws:iam::123456789012:role/b
            source_profile = loop-a
            [profile dangling]
            role_arn = arn:aws:iam::123456789012:role/c
            """.write(to: config, atomically: true, encoding: .utf8)
        let environment = isolated(home, ["AWS_CONFIG_FILE": config.path])
        let tool = try chain(environment).provider(profile: "tool")
        #expect(tool.source == "profile tool (credential_process)")
        let keys = try await tool.credentials()
        #expect(keys.accessKeyId == "ASIAPROCESS" && keys.sessionToken == "t" && keys.expiration != nil)
        #expect(throws: FerryError.self) { try chain(environment).provider(profile: "loop-a") }
        #expect(throws: FerryError.self) { try chain(environment).provider(profile: "dangling") }
    }

    @Test func stsRolesAgainstMoto() async throws {
        let root = try TestPaths.temporaryDirectory("creds-sts")
        defer { try? FileManager.default.removeItem(at: root) }
        try await MotoServer.start(logDirectory: root).stopAfter { moto in
            let tokenFile = root.appendingPathComponent("token")
            try "eyJhbGciOiJub25lIn0.eyJzdWIiOiJmZXJyeSJ9.".write(to: tokenFile, atomically: true, encoding: .utf8)
            // EKS-style web identity from the environment.
            let web = try chain(isolated(root, ["AWS_WEB_IDENTITY_TOKEN_FILE": tokenFile.path, "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/ferry",
                                                "AWS_ENDPOINT_URL_STS": moto.endpoint])).provider()
            #expect(web.source == "web-identity")
            let first = try await web.credentials()
            #expect(first.accessKeyId.hasPrefix("ASIA") && first.sessionToken != nil && first.expiration != nil, "\(first)")
            // A profile assuming a role with a source profile's keys (AssumeRole, signed).
            let config = root.appendingPathComponent("config")
            try """
                [profile base]
                aws_access_key_id = AKIABASE
                aws_secret_access_key = base-secret
                [profile deploy]
                role_arn = arn:aws:iam::123456789012:role/deploy
                source_profile = base
                role_session_name = ferry-test
                duration_seconds = 900
                """.write(to: config, atomically: true, encoding: .utf8)
            let assumed = try chain(isolated(root, ["AWS_CONFIG_FILE": config.path, "AWS_ENDPOINT_URL_STS": moto.endpoint]))
                .provider(profile: "deploy")
            #expect(assumed.source == "profile deploy (assume role via profile base)")
            let keys = try await assumed.credentials()
            #expect(keys.accessKeyId.hasPrefix("ASIA") && keys.accessKeyId != first.accessKeyId)
            // A missing token file is an error that names it.
            let broken = try chain(isolated(root, ["AWS_WEB_IDENTITY_TOKEN_FILE": root.appendingPathComponent("nope").path,
                                                   "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/ferry", "AWS_ENDPOINT_URL_STS": moto.endpoint]))
                .provider()
            await #expect(throws: FerryError.self) { _ = try await broken.credentials() }
        }
    }

    /// A loopback server speaking IMDSv2 and the container endpoint's protocol.
    func withCredentialsServer(lifetime: Double, clockOffset: Double = 0, _ body: (String, URL) async throws -> Void) async throws {
        let root = try TestPaths.temporaryDirectory("creds-server")
        defer { try? FileManager.default.removeItem(at: root) }
        let issued = root.appendingPathComponent("issued.txt")
        let server = try BackgroundProcess(name: "credentials-server", executable: "python3",
                                           arguments: [TestPaths.python.appendingPathComponent("credentials_server.py").path,
                                                       "0", "\(lifetime)", "container-token-0123", issued.path, "\(clockOffset)"],
                                           logDirectory: root)
        do {
            let endpoint = "http://127.0.0.1:\(try await server.announcedPort(after: "listening on 127.0.0.1:"))"
            #expect(await eventually(timeout: 20) { await httpAnswers(endpoint) })
            try await body(endpoint, root)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    @Test func instanceMetadataAndContainerEndpoints() async throws {
        try await withCredentialsServer(lifetime: 3600) { endpoint, root in
            let imds = try chain(isolated(root, ["AWS_EC2_METADATA_DISABLED": "false", "AWS_EC2_METADATA_SERVICE_ENDPOINT": endpoint])).provider()
            #expect(imds.source == "instance-metadata")
            #expect(try await imds.credentials().accessKeyId == "ASIATEST0001")
            let tokenFile = root.appendingPathComponent("container-token")
            try "container-token-0123\n".write(to: tokenFile, atomically: true, encoding: .utf8)
            let container = try chain(isolated(root, ["AWS_CONTAINER_CREDENTIALS_FULL_URI": endpoint + "/container/credentials",
                                                      "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": tokenFile.path])).provider()
            #expect(container.source == "container")
            let keys = try await container.credentials()
            #expect(keys.accessKeyId == "ASIATEST0002" && keys.sessionToken == "session-ASIATEST0002")
            let wrong = try chain(isolated(root, ["AWS_CONTAINER_CREDENTIALS_FULL_URI": endpoint + "/container/credentials",
                                                  "AWS_CONTAINER_AUTHORIZATION_TOKEN": "not-the-token"])).provider()
            await #expect(throws: FerryError.self) { _ = try await wrong.credentials() }
            // The full URI may not point anywhere over plain http.
            #expect(throws: FerryError.self) {
                try chain(isolated(root, ["AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://203.0.113.7/creds"])).provider()
            }
        }
    }

    /// Metadata and container endpoints whose clock is two hours off: the
    /// hour they give keys is reckoned by their clock. Without that, keys from
    /// a clock ahead would be used two hours past their end, and keys from a
    /// clock behind would look expired when fetched and be fetched again for
    /// every request.
    @Test(arguments: [7200.0, -7200.0])
    func expiryIsReckonedByTheSourcesClock(offset: Double) async throws {
        try await withCredentialsServer(lifetime: 3600, clockOffset: offset) { endpoint, root in
            let sources = [["AWS_EC2_METADATA_DISABLED": "false", "AWS_EC2_METADATA_SERVICE_ENDPOINT": endpoint],
                           ["AWS_CONTAINER_CREDENTIALS_FULL_URI": endpoint + "/container/credentials",
                            "AWS_CONTAINER_AUTHORIZATION_TOKEN": "container-token-0123"]]
            for environment in sources {
                let provider = try chain(isolated(root, environment)).provider()
                let keys = try await provider.credentials()
                let left = try #require(keys.expiration).timeIntervalSinceNow
                #expect(abs(left - 3600) < 30, "\(provider.source), source \(offset) s off: \(left) s left")
                for _ in 0..<5 { #expect(try await provider.credentials() == keys, "\(provider.source): cached") }
            }
            let issued = try String(contentsOf: root.appendingPathComponent("issued.txt"), encoding: .utf8).split(separator: "\n")
            #expect(issued.count == 2, "one fetch per provider: \(issued)")
        }
    }

    /// Keys that live 4 s: within the last 2 s a request still gets the current
    /// keys while one renewal runs; then the new keys are used. Concurrent
    /// callers cause one renewal, not one each.
    @Test func temporaryKeysAreRenewedBeforeTheyExpire() async throws {
        try await withCredentialsServer(lifetime: 4) { endpoint, root in
            let provider = try chain(isolated(root, ["AWS_CONTAINER_CREDENTIALS_FULL_URI": endpoint + "/container/credentials",
                                                     "AWS_CONTAINER_AUTHORIZATION_TOKEN": "container-token-0123"])).provider()
            let first = try await provider.credentials()
            #expect(first.accessKeyId == "ASIATEST0001")
            #expect(try await provider.credentials().accessKeyId == "ASIATEST0001", "cached, not fetched again")
            try await Task.sleep(for: .milliseconds(2300))
            // In the refresh window: many callers at once, all served at once with the current keys.
            let seen = await withTaskGroup(of: String.self) { group in
                for _ in 0..<20 { group.addTask { (try? await provider.credentials().accessKeyId) ?? "error" } }
                return await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            #expect(!seen.contains("error"), "\(seen)")
            #expect(await eventually(timeout: 5, every: 0.1) { (try? await provider.credentials().accessKeyId) == "ASIATEST0002" })
            let issued = try String(contentsOf: root.appendingPathComponent("issued.txt"), encoding: .utf8).split(separator: "\n")
            #expect(issued == ["ASIATEST0001", "ASIATEST0002"], "one renewal for all callers: \(issued)")
        }
    }
}
