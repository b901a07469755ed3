/// S3's and Ferry's size and naming limits on requests.
public enum RequestLimits {
    /// The largest request message a worker reads (bigger ones are dead-lettered);
    /// below Kafka's default `message.max.bytes` (1,000,000), so such a message
    /// can still reach the worker and its DLQ.
    public static let maxMessageBytes = 900_000
    /// S3: a key is at most 1024 bytes of UTF-8 (after the access-level prefix).
    public static let maxKeyBytes = ObjectKeyRule.maxBytes
    /// `data:` sources decode to at most this many bytes (base64 inflates by
    /// 4/3, and the whole request must fit `maxMessageBytes`).
    public static let maxDataURIBytes = 512 << 10

    /// What can only be checked once the worker has shaped the request: the
    /// full S3 key (prefix included) must pass the key rule as the user's key
    /// did, and the metadata with Ferry's markers added must still fit S3's 2 KiB.
    public static func violation(of request: TransferRequest, objectKey: String) -> FerryError? {
        if let problem = ObjectKeyRule.violation(of: objectKey, field: "key with its access-level prefix") { return problem }
        let metadataBytes = (request.metadata ?? [:]).reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        if metadataBytes > MetadataRule.maxBytes {
            return FerryError(.metadataTooLarge, "metadata with Ferry's markers is \(metadataBytes) bytes; S3 allows \(MetadataRule.maxBytes)")
        }
        return nil
    }

    /// S3's bucket naming rules: 3–63 characters of lowercase letters, digits,
    /// dots and hyphens; starting and ending with a letter or digit; no `..`;
    /// not shaped like an IP address.
    public static func bucketNameProblem(_ name: String) -> FerryError? {
        let bytes = Array(name.utf8)
        func bad(_ why: String) -> FerryError { FerryError(.invalidBucketName, "bucket name '\(name.prefix(80))' \(why)") }
        guard (3...63).contains(bytes.count) else { return bad("must be 3–63 characters") }
        let allowed = bytes.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x2D }
        guard allowed else { return bad("may hold only lowercase letters, digits, '.' and '-'") }
        let alnum: (UInt8) -> Bool = { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) }
        guard let first = bytes.first, let last = bytes.last, alnum(first), alnum(last) else {
            return bad("must start and end with a letter or digit")
        }
        guard !name.contains("..") else { return bad("may not contain '..'") }
        let parts = name.split(separator: ".")
        if parts.count == 4 && parts.allSatisfy({ UInt8($0) != nil }) { return bad("may not look like an IP address") }
        return nil
    }

    /// RFC 7230 token characters, as header names need.
    public static func isToken(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || "!#$%&'*+-.^_`|~".utf8.contains(c)
        }
    }
}
