/// Amplify Storage's access rules, enforced by the worker before any byte
/// moves (a producer is not trusted just because it can write to the topic):
///
/// | level | read | write / delete |
/// |---|---|---|
/// | guest | anyone | anyone |
/// | protected | anyone, naming the owner with `targetIdentityId` | the owner only |
/// | private | the owner only | the owner only |
///
/// With `auth.mode none` the `identityId` a producer states is taken as proven;
/// identity proof (JWT) is a separate step.
public enum AccessPolicy {
    /// Throws `AccessDenied` when `request` breaks a rule. `resolver` tells
    /// whose private area a copy source lies in.
    public static func authorize(_ request: TransferRequest,
                                 resolver: any PrefixResolver = DefaultPrefixResolver()) throws(FerryError) {
        let level = request.effectiveAccessLevel
        let actor = request.identityId.flatMap { $0.isEmpty ? nil : $0 }
        let target = request.targetIdentityId.flatMap { $0.isEmpty ? nil : $0 }
        switch (request.op, level) {
        case (_, .guest):
            break
        case (.download, .protected):
            guard target != nil || actor != nil else {
                throw FerryError(.accessDenied, "reading a protected object needs targetIdentityId (its owner)")
            }
        case (_, .protected), (_, .private):
            guard let actor else {
                throw FerryError(.accessDenied, "\(level.rawValue) objects can be \(request.op == .download ? "read" : "written") by their owner only; no identityId given")
            }
            if let target, target != actor {
                throw FerryError(.accessDenied, "\(actor) may not \(request.op == .download ? "read" : "write") \(level.rawValue) objects of \(target)")
            }
        }
        // A copy reads its source: private objects of others are off limits.
        if request.op == .copy, let source = request.source, source.hasPrefix("s3://") {
            let path = source.dropFirst(5).split(separator: "/", maxSplits: 1)
            if path.count == 2, let owner = resolver.privateOwner(of: String(path[1])), owner != actor {
                throw FerryError(.accessDenied, "the copy source is a private object of \(owner)")
            }
        }
    }
}

/// S3's and Ferry's size and naming limits on requests.
public enum RequestLimits {
    /// The largest request message a worker reads (bigger ones are dead-lettered);
    /// below Kafka's default `message.max.bytes` (1,000,000), so such a message
    /// can still reach the worker and its DLQ.
    public static let maxMessageBytes = 900_000
    /// S3: a key is at most 1024 bytes of UTF-8 (after the access-level prefix).
    public static let maxKeyBytes = 1024
    /// S3: user metadata (names and values) is at most 2 KiB.
    public static let maxMetadataBytes = 2048

    /// The first limit `request` (with its full S3 key) breaks, if any.
    public static func violation(of request: TransferRequest, objectKey: String) -> FerryError? {
        if objectKey.utf8.count > maxKeyBytes {
            return FerryError(.keyTooLong, "key is \(objectKey.utf8.count) bytes of UTF-8 with its prefix; S3 allows \(maxKeyBytes)")
        }
        let metadataBytes = (request.metadata ?? [:]).reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        if metadataBytes > maxMetadataBytes {
            return FerryError(.metadataTooLarge, "metadata is \(metadataBytes) bytes; S3 allows \(maxMetadataBytes)")
        }
        for name in (request.metadata ?? [:]).keys where !isToken(name) {
            return FerryError(.invalidRequest, "metadata name '\(name)' is not a valid HTTP header name")
        }
        return bucketNameProblem(request.bucket)
    }

    /// S3's bucket naming rules: 3–63 characters of lowercase letters, digits,
    /// dots and hyphens; starting and ending with a letter or digit; no `..`;
    /// not shaped like an IP address.
    public static func bucketNameProblem(_ name: String) -> FerryError? {
        let bytes = Array(name.utf8)
        func bad(_ why: String) -> FerryError { FerryError(.invalidBucketName, "bucket name '\(name)' \(why)") }
        guard (3...63).contains(bytes.count) else { return bad("must be 3–63 characters") }
        let allowed = bytes.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x2D }
        guard allowed else { return bad("may hold only lowercase letters, digits, '.' and '-'") }
        let alnum: (UInt8) -> Bool = { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) }
        guard alnum(bytes.first!), alnum(bytes.last!) else { return bad("must start and end with a letter or digit") }
        guard !name.contains("..") else { return bad("may not contain '..'") }
        let parts = name.split(separator: ".")
        if parts.count == 4 && parts.allSatisfy({ UInt8($0) != nil }) { return bad("may not look like an IP address") }
        return nil
    }

    /// RFC 7230 token characters, as header names need.
    static func isToken(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || "!#$%&'*+-.^_`|~".utf8.contains(c)
        }
    }
}
