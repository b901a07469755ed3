/// The rule for `identityId` and `targetIdentityId`: they become one segment
/// of an access-level prefix (`private/{identityId}/`) and the value of the
/// `ferry-owner` metadata, so they are 1…256 bytes of printable US-ASCII
/// without `/`, and neither `.` nor `..`. Amplify's Cognito identity ids
/// (`us-east-1:0f3a…`) and e-mail addresses fit.
public enum IdentityRule {
    public static let maxBytes = 256

    /// Why `identity` breaks the rule (nil when it does not); `field` names it in the message.
    public static func violation(of identity: String, field: String) -> FerryError? {
        let bytes = identity.utf8
        guard (1...maxBytes).contains(bytes.count) else {
            return FerryError(.invalidRequest, "\(field) must be 1–\(maxBytes) bytes, got \(bytes.count)")
        }
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") }) else {
            return FerryError(.invalidRequest, "\(field) may hold printable US-ASCII other than '/' and spaces only")
        }
        guard identity != "." && identity != ".." else {
            return FerryError(.invalidRequest, "\(field) may not be '.' or '..'")
        }
        return nil
    }
}
