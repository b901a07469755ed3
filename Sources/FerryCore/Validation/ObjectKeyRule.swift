/// The one rule for S3 object keys that Ferry reads or writes: a key is stored
/// exactly as given, or refused. Checked where a request, a copy source, a
/// `ferry cp` / `ferry presign` argument is decoded, again on the full key
/// after the access-level prefix, and once more by the object stores.
///
/// Why refuse rather than encode: HTTP clients and servers remove `.` and `..`
/// path segments (RFC 3986 §5.2.4; libcurl does unless told not to), so such a
/// key would reach another prefix or another bucket than the one authorised.
/// Empty segments (`//`, a leading or trailing `/`) are normalised by some
/// servers and proxies; control characters and noncharacters cannot appear in
/// S3's XML listings.
///
/// A key is valid when it is 1…1024 bytes of UTF-8, every `/`-separated
/// segment is non-empty and neither `.` nor `..`, and it holds no control
/// character (U+0000–U+001F, U+007F–U+009F) and no U+FFFE / U+FFFF.
public enum ObjectKeyRule {
    /// S3: a key is at most 1024 bytes of UTF-8.
    public static let maxBytes = 1024

    /// Why `key` breaks the rule (nil when it does not); `field` names it in the message.
    public static func violation(of key: String, field: String = "key") -> FerryError? {
        let length = key.utf8.count
        guard length > 0 else { return FerryError(.invalidRequest, "\(field) is empty") }
        guard length <= maxBytes else {
            return FerryError(.keyTooLong, "\(field) is \(length) bytes of UTF-8; S3 allows \(maxBytes)")
        }
        for scalar in key.unicodeScalars where isForbidden(scalar) {
            return FerryError(.invalidRequest, "\(field) contains the control character \(Self.describe(scalar)); keys must be printable")
        }
        for segment in key.split(separator: "/", omittingEmptySubsequences: false) {
            if segment.isEmpty {
                return FerryError(.invalidRequest, "\(field) has an empty segment (a leading or trailing '/', or '//'); keys are stored as given, so these are refused")
            }
            if segment == "." || segment == ".." {
                return FerryError(.invalidRequest, "\(field) has a '\(segment)' segment; keys are stored as given, so dot segments are refused")
            }
        }
        return nil
    }

    static func isForbidden(_ scalar: Unicode.Scalar) -> Bool {
        let v = scalar.value
        return v < 0x20 || (0x7F...0x9F).contains(v) || v == 0xFFFE || v == 0xFFFF
    }

    /// `U+000A` style, for messages (the character itself could break a log line).
    static func describe(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}
