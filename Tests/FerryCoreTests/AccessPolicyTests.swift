import Foundation
import FerryCore
import Testing

@Suite struct AccessPolicyTests {
    typealias Case = (op: TransferOperation, level: AccessLevel, actor: String?, target: String?, allowed: Bool)

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
    func rule(index: Int) {
        let c = Self.cases[index]
        let request = TransferRequest(id: "a\(index)", op: c.op, bucket: "photos", key: "k", accessLevel: c.level,
                                      identityId: c.actor, targetIdentityId: c.target,
                                      source: c.op == .upload ? "file:///x" : nil, destination: c.op == .download ? "file:///y" : nil)
        do {
            try AccessPolicy.authorize(request)
            #expect(c.allowed, "\(c) was allowed")
        } catch {
            #expect(!c.allowed, "\(c) was refused: \(error)")
            #expect(error.code == .accessDenied)
        }
    }

    @Test func copyingAnotherIdentitysPrivateObjectIsRefused() throws {
        let theft = TransferRequest(id: "c", op: .copy, bucket: "photos", key: "mine.jpg", identityId: "bob",
                                    source: "s3://photos/private/alice/secret.jpg")
        #expect(throws: FerryError.self) { try AccessPolicy.authorize(theft) }
        let own = TransferRequest(id: "c", op: .copy, bucket: "photos", key: "mine.jpg", identityId: "alice",
                                  source: "s3://photos/private/alice/secret.jpg")
        try AccessPolicy.authorize(own)
        let shared = TransferRequest(id: "c", op: .copy, bucket: "photos", key: "mine.jpg", source: "s3://photos/protected/alice/a.jpg")
        try AccessPolicy.authorize(shared)
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
        // The copy rule follows the configured layout.
        let theft = TransferRequest(id: "c", op: .copy, bucket: "b", key: "x", identityId: "bob", source: "s3://b/users/alice/own/a.txt")
        #expect(throws: FerryError.self) { try AccessPolicy.authorize(theft, resolver: resolver) }
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
        FileManager.default.createFile(atPath: path, contents: Data("s".utf8), attributes: [.posixPermissions: 0o644])
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
