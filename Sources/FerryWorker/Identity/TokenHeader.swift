import FerryCore

/// The JOSE header of a compact JWS, read strictly before any key is chosen
/// (RFC 7515 §4, RFC 8725 §3.1): the algorithm it names, the key id, and
/// whether it asks for extensions (`crit`). Header and claims must each be
/// one JSON object naming every member once, as `StrictJSON` holds: a
/// repeated `alg` or `sub` would let two readers disagree about the token.
struct TokenHeader: Sendable, Equatable {
    /// `alg`, as written (case matters: `hs256` is no algorithm).
    var algorithm: String
    /// `kid`, when present.
    var keyId: String?

    /// Reads the header of `token`; `AccessDenied` with the reason when the
    /// token is not three base64url parts, a part is not strict JSON, `alg` is
    /// missing or not a string, or `crit` is present (Ferry implements no
    /// header extension, so a token that requires one is refused).
    init(token: String) throws(FerryError) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw Self.refusal("not a compact JWS (three dot-separated parts)") }
        guard let header = Self.base64URLDecoded(parts[0]), let claims = Self.base64URLDecoded(parts[1]),
              Self.base64URLDecoded(parts[2]) != nil else {
            throw Self.refusal("a part is not base64url without padding")
        }
        if let problem = StrictJSON.check(header) { throw Self.refusal("header: \(problem)") }
        if let problem = StrictJSON.check(claims) { throw Self.refusal("claims: \(problem)") }
        guard let members = StrictJSON.members(of: header), StrictJSON.members(of: claims) != nil else {
            throw Self.refusal("header and claims must be JSON objects")
        }
        var algorithm: String?
        for member in members {
            switch member.name {
            case "alg":
                guard let value = StrictJSON.string(in: header, at: member.value) else { throw Self.refusal("alg is not a string") }
                algorithm = value
            case "kid":
                guard let value = StrictJSON.string(in: header, at: member.value) else { throw Self.refusal("kid is not a string") }
                keyId = value
            case "crit":
                throw Self.refusal("it requires header extensions (crit), and this worker implements none")
            default:
                continue
            }
        }
        guard let algorithm else { throw Self.refusal("no alg in its header") }
        self.algorithm = algorithm
    }

    static func refusal(_ reason: String) -> FerryError {
        FerryError(.accessDenied, "identity token refused: \(reason)")
    }

    /// RFC 7515's base64url: `A–Z a–z 0–9 - _`, no padding, no other byte.
    static func base64URLDecoded(_ text: Substring) -> [UInt8]? {
        var bits: UInt32 = 0
        var count = 0
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count * 3 / 4)
        for c in text.utf8 {
            let value: UInt8
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = c - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = c - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = c - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "_"): value = 63
            default: return nil
            }
            bits = bits << 6 | UInt32(value)
            count += 6
            if count >= 8 {
                count -= 8
                bytes.append(UInt8(truncatingIfNeeded: bits >> UInt32(count)))
            }
        }
        // A lone sixth of a byte, or bits left over that are not zero, is no canonical encoding.
        guard count < 6, bits & ((1 << UInt32(count)) - 1) == 0 else { return nil }
        return bytes
    }
}
