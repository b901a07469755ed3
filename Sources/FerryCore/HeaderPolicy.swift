/// Which S3 headers a request may set in `headers`: everything else is refused,
/// so a producer cannot slip in headers that change what a request means
/// (copy sources, ACL grants, checksums, signatures).
public enum HeaderPolicy {
    public static let allowed: Set<String> = [
        "cache-control", "content-disposition", "content-encoding", "content-language", "expires",
        "x-amz-storage-class", "x-amz-tagging", "x-amz-website-redirect-location",
        "x-amz-server-side-encryption", "x-amz-server-side-encryption-aws-kms-key-id",
        "x-amz-server-side-encryption-context", "x-amz-server-side-encryption-bucket-key-enabled",
        "x-amz-server-side-encryption-customer-algorithm", "x-amz-server-side-encryption-customer-key",
        "x-amz-server-side-encryption-customer-key-md5",
        // A copy's SSE-C source: the key S3 needs to read it.
        "x-amz-copy-source-server-side-encryption-customer-algorithm",
        "x-amz-copy-source-server-side-encryption-customer-key",
        "x-amz-copy-source-server-side-encryption-customer-key-md5",
    ]

    /// SSE-C headers: S3 wants them on every request that reads or writes the object's bytes.
    public static func isCustomerKeyHeader(_ name: String) -> Bool {
        name.lowercased().hasPrefix("x-amz-server-side-encryption-customer-")
    }

    /// SSE-C headers naming a copy's source key (sent on CopyObject and UploadPartCopy only).
    public static func isCopySourceKeyHeader(_ name: String) -> Bool {
        name.lowercased().hasPrefix("x-amz-copy-source-server-side-encryption-customer-")
    }

    /// The first problem with `headers`, if any: a name not allowed, a name
    /// given twice in different cases, or a value that breaks `HeaderValueRule`.
    public static func violation(in headers: [String: String]) -> FerryError? {
        var seen: Set<String> = []
        for name in headers.keys.sorted() {
            let lowered = name.lowercased()
            guard allowed.contains(lowered) else {
                return FerryError(.invalidRequest, "header '\(name.prefix(64))' is not allowed; allowed: \(allowed.sorted().joined(separator: ", "))")
            }
            guard seen.insert(lowered).inserted else {
                return FerryError(.invalidRequest, "header '\(name)' is given twice (names are case-insensitive)")
            }
            if let problem = HeaderValueRule.violation(of: headers[name]!, field: "header '\(lowered)'") { return problem }
        }
        return nil
    }
}
