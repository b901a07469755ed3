import Foundation
import FerryCore
import FerryTestSupport
import Testing

@Suite struct AccessPolicyTests {
    typealias Case = (op: TransferOperation, level: AccessLevel, actor: String?, target: String?, allowed: Bool)

    /// The rules Ferry always had: the default permissions must keep them.
    static let cases: [Case] = [
        (.upload, .guest, nil, nil, true),
        (.download, .guest, nil, nil, true),
        (.delete, .guest, "bob", nil, true),
        (.download, .protected, "bob", "alice", true),       // protected: readable by all, naming the owner
        (.download, .protected, nil, "alice", true),
        (.download, .protected, nil, nil, false),
        (.upload, .protected, "alice", nil, true),            // the owner writes
        (.upload, .protected, "bob", "alice", false),         // nobody else
        (.delete, .protected, "bob", "alice", false),
        (.upload, .protected, nil, nil, false),
        (.download, .private, "alice", nil, true),
        (.download, .private, "alice", "alice", true),
        (.download, .private, "bob", "alice", false),         // private: the owner only
        (.download, .private, nil, "alice", false),
        (.upload, .private, "bob", "alice", false),
        (.delete, .private, "alice", nil, true),
    ]

    @Test(arguments: cases.indices)
    func defaultsKeepTheOriginalRules(index: Int) {
        let c = Self.cases[index]
        let request = TransferRequest(id: "a\(index)", op: c.op, bucket: "photos", key: "k", accessLevel: c.level,
                                      identityId: c.actor, targetIdentityId: c.target,
                                      source: c.op == .upload ? "file:///x" : nil, destination: c.op == .download ? "file:///y" : nil)
        let caller = Caller(role: c.actor == nil ? .guest : .authenticated, identityId: c.actor)
        do {
            _ = try AccessPolicy().authorize(request, caller: caller)
            #expect(c.allowed, "\(c) was allowed")
        } catch {
            #expect(!c.allowed, "\(c) was refused: \(error)")
            #expect(error.code == .accessDenied)
        }
    }

    /// Every request shape, against random permission tables (seeded): a
    /// request is allowed exactly when the table grants its role the right in
    /// the scope the object lies in; another identity's private objects never;
    /// and an allowed request's key lies in the area the rule was checked for.
    @Test func decisionsFollowThePermissionTable() throws {
        var rng = HostileInput.rng(seed: 0xACCE55)
        let identities: [String?] = [nil, "alice", "bob"]
        let resolver = DefaultPrefixResolver()
        var checked = 0, allowed = 0
        for _ in 0..<40 {
            var permissions = AccessPermissions.defaults
            for role in CallerRole.allCases {
                for scope in AccessScope.allCases {
                    permissions.set(Set(AccessRight.allCases.filter { _ in Bool.random(using: &rng) }), for: role, in: scope)
                }
            }
            let policy = AccessPolicy(permissions: permissions, resolver: resolver)
            var shapes: [(TransferOperation, AccessLevel, CallerRole, String?, String?, String?)] = []
            for op in [TransferOperation.upload, .download, .delete] { for level in AccessLevel.allCases { for role in CallerRole.allCases {
                for callerId in identities { for stated in identities { for target in identities {
                    shapes.append((op, level, role, callerId, stated, target))
                } } }
            } } }
            for (op, level, role, callerId, stated, target) in shapes {
                if role == .authenticated && callerId == nil { continue }
                let request = TransferRequest(id: "r", op: op, bucket: "b", key: "k.txt", accessLevel: level, identityId: stated,
                                              targetIdentityId: target)
                let caller = Caller(role: role, identityId: callerId)
                // The rule, restated independently of the implementation.
                let right: AccessRight = op == .download ? .read : op == .delete ? .delete : .write
                let owner: String? = op == .download && level == .protected ? (target ?? stated) : stated
                var expected: Bool
                let namesAnotherOwner = level != .guest && !(op == .download && level == .protected) && target != nil && target != stated
                switch level {
                case .guest: expected = permissions.allows(role, right, in: .guest)
                case .protected:
                    expected = owner != nil && permissions.allows(role, right, in: owner == callerId ? .protectedOwn : .protected)
                case .private:
                    expected = owner != nil && owner == callerId && permissions.allows(role, right, in: .privateOwn)
                }
                if namesAnotherOwner { expected = false }
                checked += 1
                do {
                    let decision = try policy.authorize(request, caller: caller)
                    #expect(expected, "allowed: \(op) \(level) by \(caller) owner \(owner ?? "-") with \(permissions.summary(of: role))")
                    #expect(resolver.area(of: decision.objectKey) == ObjectArea(level: level, owner: level == .guest ? nil : owner))
                    allowed += 1
                } catch {
                    #expect(!expected, "refused: \(op) \(level) by \(caller): \(error.message)")
                    #expect(error.code == .accessDenied)
                }
            }
        }
        #expect(allowed > 0 && allowed < checked)
    }

    @Test func refusalsNameTheRule() {
        var permissions = AccessPermissions.defaults
        permissions.set([.read], for: .guest, in: .guest)
        let request = TransferRequest(id: "r", op: .delete, bucket: "b", key: "k")
        do {
            _ = try AccessPolicy(permissions: permissions).authorize(request, caller: .anonymousGuest)
            Issue.record("allowed")
        } catch {
            #expect(error.message.contains("access.guestPermissions: guest=read"), "\(error.message)")
        }
    }

    @Test func copySourcesAreReadsUnderTheSameRules() throws {
        let policy = AccessPolicy()
        let alice = Caller(role: .authenticated, identityId: "alice")
        let bob = Caller(role: .authenticated, identityId: "bob")
        func copy(_ source: String, level: AccessLevel? = nil, owner: String? = nil, identity: String? = "bob") -> TransferRequest {
            TransferRequest(id: "c", op: .copy, bucket: "photos", key: "mine.jpg", identityId: identity, source: source,
                            sourceAccessLevel: level, sourceIdentityId: owner)
        }
        // A full key: its area decides.
        #expect(throws: FerryError.self) { try policy.authorize(copy("s3://photos/private/alice/secret.jpg"), caller: bob) }
        #expect(try policy.authorize(copy("s3://photos/private/alice/secret.jpg", identity: "alice"), caller: alice)
            .copySourceKey == "private/alice/secret.jpg")
        #expect(try policy.authorize(copy("s3://photos/protected/alice/a.jpg"), caller: bob).copySourceKey == "protected/alice/a.jpg")
        #expect(try policy.authorize(copy("s3://photos/public/a.jpg", identity: nil), caller: .anonymousGuest).copySourceKey == "public/a.jpg")
        // Outside every area: refused, whoever asks.
        #expect(throws: FerryError.self) { try policy.authorize(copy("s3://photos/elsewhere/a.jpg"), caller: bob) }
        // A user key with its level, as Amplify's Storage.copy names it.
        #expect(try policy.authorize(copy("s3://photos/a.jpg", level: .protected, owner: "alice"), caller: bob)
            .copySourceKey == "protected/alice/a.jpg")
        #expect(try policy.authorize(copy("s3://photos/a.jpg", level: .private), caller: bob).copySourceKey == "private/bob/a.jpg")
        #expect(throws: FerryError.self) { try policy.authorize(copy("s3://photos/a.jpg", level: .private, owner: "alice"), caller: bob) }
        // A guest may not read a protected object when guests' protected rights are taken away.
        var strict = AccessPermissions.defaults
        strict.set([], for: .guest, in: .protected)
        #expect(throws: FerryError.self) {
            try AccessPolicy(permissions: strict).authorize(copy("s3://photos/protected/alice/a.jpg", identity: nil), caller: .anonymousGuest)
        }
        // Other buckets only when configured.
        #expect(throws: FerryError.self) { try policy.authorize(copy("s3://victim/public/a.jpg"), caller: bob) }
        #expect(try AccessPolicy(copySourceBuckets: ["shared"]).authorize(copy("s3://shared/public/a.jpg"), caller: bob).copySourceBucket == "shared")
        #expect(try AccessPolicy(copySourceBuckets: nil).authorize(copy("s3://any/public/a.jpg"), caller: bob).copySourceBucket == "any")
    }

    @Test func permissionsParseFromSettings() throws {
        var permissions = AccessPermissions.defaults
        try permissions.apply(["guest=read", "protected = none", "privateOwn=read+write"], to: .guest)
        #expect(permissions.summary(of: .guest) == "guest=read protected=none protectedOwn=none privateOwn=read+write")
        #expect(permissions.summary(of: .authenticated) == AccessPermissions.defaults.summary(of: .authenticated))
        #expect(throws: ConfigurationError.self) { try permissions.apply(["private=read"], to: .guest) }
        #expect(throws: ConfigurationError.self) { try permissions.apply(["guest=list"], to: .guest) }
        #expect(throws: ConfigurationError.self) { try permissions.apply(["guest"], to: .guest) }
    }
}

@Suite struct RequestLimitTests {
    func request(bucket: String = "photos", metadata: [String: String]? = nil) -> TransferRequest {
        TransferRequest(id: "l", op: .delete, bucket: bucket, key: "k", metadata: metadata)
    }

    @Test func keyLengthCountsUTF8BytesWithThePrefix() {
        let fits = String(repeating: "é", count: (1024 - 7) / 2)       // "public/" + 2 bytes each
        #expect(RequestLimits.violation(of: request(), objectKey: "public/" + fits) == nil)
        #expect(RequestLimits.violation(of: request(), objectKey: "public/" + fits + "é")?.code == .keyTooLong)
    }

    @Test func metadataLimits() {
        let big = ["note": String(repeating: "x", count: 2045)]
        #expect(RequestLimits.violation(of: request(metadata: big), objectKey: "k")?.code == .metadataTooLarge)
        #expect(RequestLimits.violation(of: request(metadata: ["ok": "v"]), objectKey: "k") == nil)
        // Names and values are checked when the request is decoded.
        #expect(MetadataRule.violation(of: ["bad name": "v"])?.code == .invalidRequest)
        #expect(MetadataRule.violation(of: big)?.code == .metadataTooLarge)
        #expect(MetadataRule.violation(of: ["a": "1", "A": "2"])?.code == .invalidRequest, "S3 would merge them")
        #expect(MetadataRule.violation(of: ["ferry-owner": "mallory"])?.code == .invalidRequest, "Ferry's own markers are reserved")
        #expect(MetadataRule.violation(of: ["note": "line\r\nx-amz-meta-evil: 1"])?.code == .invalidRequest)
        #expect(MetadataRule.violation(of: ["note": "café"])?.code == .invalidRequest, "non-ASCII is refused, as boto3 does")
        #expect(MetadataRule.violation(of: ["note": "plain text, with punctuation!"]) == nil)
    }

    @Test(arguments: [("ab", false), ("abc", true), ("my-bucket.logs", true), ("My-Bucket", false), ("-abc", false),
                      ("abc-", false), ("a..b", false), ("192.168.1.1", false), ("a_b_c", false),
                      (String(repeating: "a", count: 63), true), (String(repeating: "a", count: 64), false)])
    func bucketNames(name: String, valid: Bool) {
        let problem = RequestLimits.bucketNameProblem(name)
        #expect((problem == nil) == valid, "\(name)")
        if let problem { #expect(problem.code == .invalidBucketName) }
    }

    @Test func oversizedMessagesAreRefusedUnread() {
        let huge = [UInt8](repeating: 0x20, count: RequestLimits.maxMessageBytes + 1)
        guard case .failure(let failure) = RequestDecoder.decode(huge) else { Issue.record("accepted"); return }
        #expect(failure.error.code == .requestTooLarge)
    }
}

@Suite struct PrefixTemplateTests {
    @Test func customPrefixesPerLevel() throws {
        let resolver = try TemplatePrefixResolver(guest: "shared/", protected: "users/{identityId}/pub/", private: "users/{identityId}/own/")
        var request = TransferRequest(id: "p", op: .upload, bucket: "b", key: "a.txt", source: "file:///x")
        #expect(try resolver.objectKey(for: request) == "shared/a.txt")
        request.accessLevel = .private
        request.identityId = "alice"
        #expect(try resolver.objectKey(for: request) == "users/alice/own/a.txt")
        #expect(resolver.privateOwner(of: "users/alice/own/a.txt") == "alice")
        #expect(resolver.privateOwner(of: "users/alice/pub/a.txt") == nil)
        #expect(resolver.area(of: "users/alice/pub/a.txt") == ObjectArea(level: .protected, owner: "alice"))
        #expect(resolver.area(of: "shared/a.txt") == ObjectArea(level: .guest, owner: nil))
        #expect(resolver.area(of: "other/a.txt") == nil)
        // The copy rule follows the configured layout.
        let theft = TransferRequest(id: "c", op: .copy, bucket: "b", key: "x", identityId: "bob", source: "s3://b/users/alice/own/a.txt")
        #expect(throws: FerryError.self) {
            try AccessPolicy(resolver: resolver).authorize(theft, caller: Caller(role: .authenticated, identityId: "bob"))
        }
        #expect(throws: ConfigurationError.self) { try TemplatePrefixResolver(private: "private/") }
        #expect(throws: ConfigurationError.self) { try TemplatePrefixResolver(protected: "p/{identityId}/", private: "p/{identityId}/") }
        request.identityId = "a/b"
        #expect(throws: FerryError.self) { try resolver.objectKey(for: request) }
    }
}

@Suite struct SecretRedactionTests {
    @Test func tokensAndCustomerKeysAreReplacedInPlace() {
        let message = #"{"id":"r1","op":"upload","auth":"eyJhbGciOi.J9.sig","bucket":"b","key":"k","headers":{"x-amz-server-side-encryption-customer-key":"c2VjcmV0LWtleQ==","cache-control":"no-cache"}}"#
        let (bytes, fields) = SecretRedaction.redact(Array(message.utf8))
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(!text.contains("eyJhbGciOi.J9.sig"))
        #expect(!text.contains("c2VjcmV0LWtleQ=="))
        #expect(text == message.replacingOccurrences(of: "\"eyJhbGciOi.J9.sig\"", with: "\"<redacted>\"")
            .replacingOccurrences(of: "\"c2VjcmV0LWtleQ==\"", with: "\"<redacted>\""))
        #expect(Set(fields) == ["auth", "headers.x-amz-server-side-encryption-customer-key"])
    }

    /// A name given twice has two values, and readers differ on which they take:
    /// each is a secret. (Redaction read the last only, so the first, the one
    /// Ferry's decoder used, went into the DLQ as it was.)
    @Test func everyCopyOfASecretIsRedacted() throws {
        let seed = FuzzReplay.seed
        var rng = HostileInput.rng(seed: seed)
        let names = ["x-amz-server-side-encryption-customer-key", "X-Amz-Server-Side-Encryption-Customer-Key",
                     "x-amz-copy-source-server-side-encryption-customer-key", "cache-control"]
        for round in 0..<500 {
            var secrets: [String] = []
            func secret() -> String {
                let value = "s\(round)-\(secrets.count)-" + String((0..<8).map { _ in "abcXYZ019+/=".randomElement(using: &rng)! })
                secrets.append(value)
                return value
            }
            var members = [#""id":"r\#(round)""#, #""op":"upload""#, #""bucket":"b""#, #""key":"k""#]
            for _ in 0..<Int.random(in: 1...3, using: &rng) { members.append(#""auth":"\#(secret())""#) }
            for _ in 0..<Int.random(in: 0...3, using: &rng) {
                var headers: [String] = []
                for _ in 0..<Int.random(in: 1...3, using: &rng) {
                    let name = names.randomElement(using: &rng)!
                    headers.append(#""\#(name)":"\#(name == "cache-control" ? "no-cache" : secret())""#)
                }
                members.append(#""headers":{"# + headers.joined(separator: " , ") + "}")
            }
            members.shuffle(using: &rng)
            let message = "{" + members.joined(separator: Bool.random(using: &rng) ? "," : ", ") + (Bool.random(using: &rng) ? ",}" : "}")
            let (bytes, fields) = SecretRedaction.redact(Array(message.utf8))
            let text = String(decoding: bytes, as: UTF8.self)
            for value in secrets {
                #expect(!text.contains(value), "seed \(seed) round \(round): \(value) left in \(text)")
            }
            #expect(fields.contains("auth") && Set(fields).count == fields.count)
            #expect(text.contains("no-cache") == message.contains("no-cache"))
        }
    }

    @Test func messagesWithoutSecretsStayByteIdentical() {
        for message in ["{", "not json", #"{"id":"a","op":"delete","bucket":"b","key":"k"}"#] {
            let (bytes, fields) = SecretRedaction.redact(Array(message.utf8))
            #expect(bytes == Array(message.utf8))
            #expect(fields.isEmpty)
        }
    }

    @Test func exposedFiles() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID().uuidString)").path
        defer { unlink(path) }
        _ = FileManager.default.createFile(atPath: path, contents: Data("s".utf8), attributes: [.posixPermissions: 0o644])
        #expect(SecretRedaction.isExposed(path))
        chmod(path, 0o600)
        #expect(!SecretRedaction.isExposed(path))
    }
}

/// Layouts where two levels' keys could coincide are refused at start-up.
@Suite struct PrefixLayoutTests {
    @Test(arguments: [
        ("", "protected/{identityId}/", "private/{identityId}/"),            // empty guest prefix: everything is a guest key
        ("protected/", "protected/{identityId}/", "private/{identityId}/"),  // guest = protected's head
        ("protected/bob/", "protected/{identityId}/", "private/{identityId}/"),
        ("users/", "users/{identityId}/pub/", "users/{identityId}/own/"),    // guest is the owned levels' head
        ("public/", "{identityId}/", "private/{identityId}/"),              // an empty head holds every key
        ("public/", "data/{identityId}/", "data/private/{identityId}/"),     // identity "private" under protected
        ("public/", "u/{identityId}/a/", "u/{identityId}/a/b/"),             // one tail starts the other
        ("public/", "u/{identityId}x/", "u/{identityId}y/"),                 // tails not separated by '/'
    ])
    func overlappingLayoutsAreRefused(guest: String, protected: String, private: String) {
        #expect(throws: ConfigurationError.self) {
            try TemplatePrefixResolver(guest: guest, protected: protected, private: `private`)
        }
    }

    @Test(arguments: [
        ("public/", "protected/{identityId}/", "private/{identityId}/"),
        ("shared/", "users/{identityId}/pub/", "users/{identityId}/own/"),
        ("guest/", "p/{identityId}/", "q/{identityId}/"),
    ])
    func separateLayoutsAreAccepted(guest: String, protected: String, private: String) throws {
        _ = try TemplatePrefixResolver(guest: guest, protected: protected, private: `private`)
    }
}
