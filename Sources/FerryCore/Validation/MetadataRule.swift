/// The rule for a request's user `metadata` (sent as `x-amz-meta-<name>`):
/// names are HTTP tokens, distinct without regard to case (S3 lowercases them)
/// and not in Ferry's reserved `ferry-` namespace (the markers a worker adds);
/// values follow `HeaderValueRule`; names and values together are at most
/// 2 KiB, as S3 allows.
public enum MetadataRule {
    /// S3: user metadata (names and values) is at most 2 KiB.
    public static let maxBytes = 2048
    /// Names Ferry writes itself (`ferry-transfer-id`, `ferry-owner`, …).
    public static let reservedPrefix = "ferry-"

    /// The first problem with `metadata`, if any.
    public static func violation(of metadata: [String: String]) -> FerryError? {
        let total = metadata.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        if total > maxBytes {
            return FerryError(.metadataTooLarge, "metadata is \(total) bytes; S3 allows \(maxBytes)")
        }
        var seen: Set<String> = []
        for name in metadata.keys.sorted() {
            guard RequestLimits.isToken(name) else {
                return FerryError(.invalidRequest, "metadata name '\(name.prefix(64))' is not a valid HTTP header name")
            }
            let lowered = name.lowercased()
            guard seen.insert(lowered).inserted else {
                return FerryError(.invalidRequest, "metadata names '\(name)' and another differ only in case; S3 would merge them")
            }
            guard !lowered.hasPrefix(reservedPrefix) else {
                return FerryError(.invalidRequest, "metadata name '\(name)' is reserved: names starting with '\(reservedPrefix)' are Ferry's markers")
            }
            if let problem = HeaderValueRule.violation(of: metadata[name]!, field: "metadata value of '\(name)'") { return problem }
        }
        return nil
    }
}
