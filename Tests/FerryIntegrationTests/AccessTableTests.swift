import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import JWTKit
import Logging
import Testing

/// The README's access table, end to end: a worker with `--auth-mode jwt`,
/// guests allowed, a separate issuer for guest identities, and guests limited
/// to reading and writing the guest level (no delete) plus their own protected
/// area. Each allowed case completes; each refused one is `AccessDenied` and
/// writes, reads and removes nothing (checked with boto3 and the data root).
@Suite(.serialized) struct AccessTableTests {
    let logger = Logger(label: "test.access")

    /// Callers: `anonymous` (no token), `gina` (a guest identity: a token from
    /// the guest issuer), `alice` and `bob` (authenticated).
    struct Row: Sendable, CustomStringConvertible {
        var caller: String
        var op: TransferOperation
        var level: AccessLevel
        /// Whose area the object is in (nil on the guest level).
        var owner: String?
        var allowed: Bool
        var description: String { "\(caller) \(op.rawValue) \(level.rawValue)\(owner.map { " of \($0)" } ?? "") → \(allowed ? "allowed" : "AccessDenied")" }
    }

    static let rows: [Row] = [
        Row(caller: "anonymous", op: .upload, level: .guest, owner: nil, allowed: true),
        Row(caller: "anonymous", op: .download, level: .guest, owner: nil, allowed: true),
        Row(caller: "anonymous", op: .delete, level: .guest, owner: nil, allowed: false),   // guest=read+write
        Row(caller: "alice", op: .delete, level: .guest, owner: nil, allowed: true),
        Row(caller: "anonymous", op: .download, level: .protected, owner: "alice", allowed: true),
        Row(caller: "anonymous", op: .upload, level: .protected, owner: "alice", allowed: false),
        Row(caller: "gina", op: .upload, level: .protected, owner: "gina", allowed: true),  // protectedOwn=read+write
        Row(caller: "gina", op: .download, level: .protected, owner: "gina", allowed: true),
        Row(caller: "gina", op: .delete, level: .protected, owner: "gina", allowed: false),
        Row(caller: "gina", op: .upload, level: .private, owner: "gina", allowed: false),   // privateOwn=none
        Row(caller: "bob", op: .download, level: .protected, owner: "alice", allowed: true),
        Row(caller: "bob", op: .upload, level: .protected, owner: "alice", allowed: false),
        Row(caller: "bob", op: .delete, level: .protected, owner: "alice", allowed: false),
        Row(caller: "alice", op: .upload, level: .protected, owner: "alice", allowed: true),
        Row(caller: "alice", op: .delete, level: .protected, owner: "alice", allowed: true),
        Row(caller: "anonymous", op: .download, level: .private, owner: "alice", allowed: false),
        Row(caller: "bob", op: .download, level: .private, owner: "alice", allowed: false),
        Row(caller: "bob", op: .delete, level: .private, owner: "alice", allowed: false),
        Row(caller: "alice", op: .upload, level: .private, owner: "alice", allowed: true),
        Row(caller: "alice", op: .download, level: .private, owner: "alice", allowed: true),
        Row(caller: "alice", op: .delete, level: .private, owner: "alice", allowed: true),
    ]

    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var iss: IssuerClaim
        var exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    @Test func roleLevelOperationTableThroughAWorker() async throws {
        try await MotoServer.start(logDirectory: try TestPaths.temporaryDirectory("access-moto")).stopAfter { moto in try await run(moto) }
    }

    func run(_ server: any S3TestServer) async throws {
        let base = try TestPaths.temporaryDirectory("access")
        let env = try EndToEndTests.Environment.oneBroker(base: base, server: server, bucket: "acl", logger: logger)
        let s3 = Boto3(server)
        for bucket in ["acl", "other"] { try await s3("create-bucket", bucket) }
        let secret = "access-table-secret-0123456789abcdef"
        let secretFile = base.appendingPathComponent("jwt.secret")
        try Data(secret.utf8).write(to: secretFile)
        chmod(secretFile.path, 0o600)
        let keys = await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        func token(_ caller: String) async throws -> String? {
            switch caller {
            case "anonymous": return nil
            case "gina": return try await keys.sign(Claims(sub: .init(value: caller), iss: "ferry-guests", exp: .init(value: Date() + 900)))
            default: return try await keys.sign(Claims(sub: .init(value: caller), iss: "ferry-users", exp: .init(value: Date() + 900)))
            }
        }
        let worker = try env.startWorker(name: "worker-access", stateDir: "state", extra: [
            "--auth-mode", "jwt", "--jwt-secret-file", secretFile.path, "--jwt-issuer", "ferry-users",
            "--jwt-guest-issuer", "ferry-guests", "--allow-guests",
            "--guest-permission", "guest=read+write", "--guest-permission", "protectedOwn=read+write",
        ])
        defer { try? FileManager.default.removeItem(at: base) }
        let seed = base.appendingPathComponent("seed.txt")
        try Data("seeded bytes\n".utf8).write(to: seed)
        // With tokens the data root is laid out by access level: the source is in its public area, and
        // downloads write there too, so only the object's rules decide.
        let source = env.dataRoot.appendingPathComponent("public/upload.txt")
        try FileManager.default.createDirectory(at: source.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("uploaded bytes\n".utf8).write(to: source)
        let resolver = DefaultPrefixResolver()
        func fullKey(_ level: AccessLevel, _ owner: String?, _ key: String) throws -> String {
            try resolver.prefix(for: level, owner: owner) + key
        }

        // Produce every row's request; objects that reads and deletes need are there first.
        var requests: [(row: Row, id: String, key: String)] = []
        for (index, row) in Self.rows.enumerated() {
            let id = "acl-\(index)"
            let key = try fullKey(row.level, row.owner, "\(id).txt")
            if row.op != .upload { try await s3("put", "acl", key, seed.path) }
            let identity: String? = row.caller == "anonymous" ? row.owner : row.caller
            var request: [String: Any] = ["id": id, "op": row.op.rawValue, "bucket": "acl", "key": "\(id).txt",
                                          "accessLevel": row.level.rawValue]
            if let identity { request["identityId"] = identity }
            if let owner = row.owner, owner != identity { request["targetIdentityId"] = owner }
            if let token = try await token(row.caller) { request["auth"] = token }
            switch row.op {
            case .upload: request["source"] = source.absoluteString
            case .download: request["destination"] = env.dataRoot.appendingPathComponent("public/out/\(id).txt").absoluteString
            default: break
            }
            let json = String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self)
            try await env.kcat.produce(topic: "ferry.requests", key: "acl/\(id)", value: json)
            requests.append((row, id, key))
        }

        for (row, id, key) in requests {
            let status = try await env.terminalStatus(of: id, timeout: 90)
            let stored = (try? await s3("head", "acl", key)) != nil
            let downloaded = FileManager.default.fileExists(atPath: env.dataRoot.appendingPathComponent("public/out/\(id).txt").path)
            if row.allowed {
                #expect(status?.state == .completed, "\(row): \(status?.state.rawValue ?? "no status") \(status?.error?.message ?? "")")
                switch row.op {
                case .upload: #expect(stored, "\(row): nothing stored at \(key)")
                case .download: #expect(downloaded, "\(row): no file")
                case .delete: #expect(!stored, "\(row): \(key) still there")
                case .copy: break
                }
            } else {
                #expect(status?.state == .rejected && status?.error?.code == "AccessDenied",
                        "\(row): \(status?.state.rawValue ?? "no status") \(status?.error?.code ?? "") \(status?.error?.message ?? "")")
                switch row.op {
                case .upload: #expect(!stored, "\(row): \(key) was written")
                case .download: #expect(!downloaded, "\(row): a file was written")
                case .delete: #expect(stored, "\(row): \(key) was removed")
                case .copy: break
                }
            }
        }
        // Copies: a read of the source plus a write of the destination.
        let marked = base.appendingPathComponent("marked.txt")
        try Data("source bytes\n".utf8).write(to: marked)
        // As a worker would have written them: with Ferry's markers and user metadata.
        let sourceMetadata = #"{"ferry-transfer-id":"old-upload","ferry-sequencer":"0000000000000001","ferry-owner":"alice","srcnote":"from the source"}"#
        for key in ["protected/alice/src-1.txt", "private/alice/src-2.txt", "private/alice/src-3.txt"] {
            try await s3("put", "acl", key, marked.path, sourceMetadata)
        }
        try await s3("put", "other", "public/src-4.txt", marked.path)
        let copies: [(id: String, caller: String, fields: [String: Any], allowed: Bool, destination: String)] = [
            ("cp-1", "anonymous", ["source": "s3://acl/protected/alice/src-1.txt"], true, "public/cp-1.txt"),
            ("cp-2", "anonymous", ["source": "s3://acl/private/alice/src-2.txt"], false, "public/cp-2.txt"),
            ("cp-3", "bob", ["source": "s3://acl/src-3.txt", "sourceAccessLevel": "private", "sourceIdentityId": "alice"], false,
             "public/cp-3.txt"),
            ("cp-4", "alice", ["source": "s3://acl/src-3.txt", "sourceAccessLevel": "private", "accessLevel": "private",
                               "metadata": ["note": "replaced"], "contentType": "text/x-copied"], true, "private/alice/cp-4.txt"),
            ("cp-5", "bob", ["source": "s3://other/public/src-4.txt"], false, "public/cp-5.txt"),
            ("cp-6", "gina", ["source": "s3://acl/src-1.txt", "sourceAccessLevel": "protected", "sourceIdentityId": "alice"], true,
             "public/cp-6.txt"),
        ]
        for copy in copies {
            var request: [String: Any] = ["id": copy.id, "op": "copy", "bucket": "acl", "key": "\(copy.id).txt"]
            request.merge(copy.fields) { _, new in new }
            if copy.caller != "anonymous" { request["identityId"] = copy.caller }
            if let token = try await token(copy.caller) { request["auth"] = token }
            let json = String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self)
            try await env.kcat.produce(topic: "ferry.requests", key: "acl/\(copy.id)", value: json)
        }
        // A forged token is refused, never downgraded to a guest.
        let forged = try await JWTKeyCollection().add(hmac: HMACKey(from: "not-the-secret-not-the-secret-000"), digestAlgorithm: .sha256)
            .sign(Claims(sub: "alice", iss: "ferry-users", exp: .init(value: Date() + 900)))
        try await env.kcat.produce(topic: "ferry.requests", key: "acl/forged", value: """
            {"id":"forged","op":"upload","bucket":"acl","key":"forged.txt","identityId":"alice","source":"\(source.absoluteString)","auth":"\(forged)"}
            """)
        for copy in copies {
            let status = try await env.terminalStatus(of: copy.id, timeout: 90)
            let head = try? await s3("head", "acl", copy.destination)
            if copy.allowed {
                #expect(status?.state == .completed, "\(copy.id): \(status?.error?.message ?? "no status")")
                #expect(head != nil, "\(copy.id): nothing at \(copy.destination)")
            } else {
                #expect(status?.state == .rejected && status?.error?.code == "AccessDenied", "\(copy.id): \(status?.error?.message ?? "no status")")
                #expect(head == nil, "\(copy.id): \(copy.destination) was written")
            }
        }
        // The copy's metadata: the request's, plus this transfer's markers, none of the source's.
        let copied = try JSONDecoder().decode(Boto3.ObjectHead.self, from: Data(try await s3("head", "acl", "private/alice/cp-4.txt").utf8))
        #expect(copied.Metadata["note"] == "replaced" && copied.ContentType == "text/x-copied", "\(copied)")
        #expect(copied.Metadata["ferry-transfer-id"] == "cp-4" && copied.Metadata["ferry-owner"] == "alice", "\(copied.Metadata)")
        #expect(copied.Metadata["srcnote"] == nil && copied.Metadata["ferry-sequencer"] != "0000000000000001", "\(copied.Metadata)")
        // Without metadata in the request, the source's user metadata is kept, its markers are not.
        let kept = try JSONDecoder().decode(Boto3.ObjectHead.self, from: Data(try await s3("head", "acl", "public/cp-1.txt").utf8))
        #expect(kept.Metadata["srcnote"] == "from the source" && kept.Metadata["ferry-transfer-id"] == "cp-1", "\(kept.Metadata)")
        #expect(kept.Metadata["ferry-owner"] == nil, "an anonymous guest's copy names no owner: \(kept.Metadata)")
        let forgedStatus = try await env.terminalStatus(of: "forged")
        #expect(forgedStatus?.state == .rejected && forgedStatus?.error?.code == "AccessDenied")
        #expect((try? await s3("head", "acl", "public/forged.txt")) == nil)

        #expect(worker.isRunning, "\(worker.log.suffix(3000))")
        await worker.stop()
    }
}
