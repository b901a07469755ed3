import FerryCore

/// The ETag S3 gives an object completed from parts: the MD5 of the parts'
/// MD5s (as bytes, in part order), then `-` and the number of parts, quoted.
/// Ceph RGW, moto, MinIO and the local store compute it the same way.
public enum MultipartETag {
    /// Nil when a part's ETag is not an MD5 (32 hex digits, quoted or bare):
    /// then nothing can be said of the whole.
    public static func of(_ parts: [CompletedPart]) -> String? {
        guard !parts.isEmpty else { return nil }
        var md5s: [UInt8] = []
        md5s.reserveCapacity(16 * parts.count)
        for part in parts.sorted(by: { $0.partNumber < $1.partNumber }) {
            guard let bytes = md5Bytes(part.eTag) else { return nil }
            md5s += bytes
        }
        return "\"\(Digest.md5(md5s).hexString)-\(parts.count)\""
    }

    /// The 16 bytes of an MD5 written as 32 hex digits (quotes around them allowed).
    static func md5Bytes(_ eTag: String) -> [UInt8]? {
        var hex = Substring(eTag)
        if hex.hasPrefix("\"") && hex.hasSuffix("\"") && hex.count >= 2 { hex = hex.dropFirst().dropLast() }
        let digits = Array(hex.utf8)
        guard digits.count == 32 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        for i in stride(from: 0, to: 32, by: 2) {
            guard let high = Digits.hexValue(digits[i]), let low = Digits.hexValue(digits[i + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }
}
