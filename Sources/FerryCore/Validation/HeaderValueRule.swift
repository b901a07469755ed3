/// The rule for every value Ferry puts into an HTTP header on a request's
/// behalf: user metadata (`x-amz-meta-*`), allow-listed headers, the content
/// type. A value is 0…8192 bytes of printable US-ASCII (0x20–0x7E) without
/// leading or trailing spaces.
///
/// CR and LF would end the header and start another (header injection); other
/// control characters and non-ASCII bytes are not stored the same way by every
/// S3 server (boto3 refuses non-ASCII metadata for the same reason); spaces at
/// either end are stripped by HTTP, so the stored value would differ.
public enum HeaderValueRule {
    public static let maxBytes = 8192

    /// Why `value` breaks the rule (nil when it does not); `field` names it in the message.
    public static func violation(of value: String, field: String) -> FerryError? {
        let bytes = value.utf8
        guard bytes.count <= maxBytes else {
            return FerryError(.invalidRequest, "\(field) is \(bytes.count) bytes; header values are at most \(maxBytes)")
        }
        for byte in bytes where byte < 0x20 || byte > 0x7E {
            let what: String
            switch byte {
            case 0x0D, 0x0A: what = "a line break (CR or LF)"
            case 0x00: what = "a NUL byte"
            case ..<0x20, 0x7F: what = "a control character"
            default: what = "a non-ASCII character"
            }
            return FerryError(.invalidRequest, "\(field) contains \(what); header values must be printable US-ASCII")
        }
        if bytes.first == 0x20 || bytes.last == 0x20 {
            return FerryError(.invalidRequest, "\(field) begins or ends with a space, which HTTP would strip")
        }
        return nil
    }
}
