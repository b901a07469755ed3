import FerryCore
import FerryStorage
import Foundation
import Synchronization

/// AWS Signature Version 4 as a pure function of its inputs, in the stages AWS
/// documents (canonical request → string to sign → signing key → signature), so
/// each stage can be compared with botocore's for the same inputs.
public struct SigV4Signer: Sendable {
    public var credentials: AWSCredentials
    public var region: String
    public var service: String
    /// Process-wide (a signer is made per request); keyed by everything the
    /// key depends on, so a refreshed secret or a new day derives a new one.
    private static let keyCache = SigningKeyCache()

    public init(credentials: AWSCredentials, region: String, service: String = "s3") {
        self.credentials = credentials
        self.region = region
        self.service = service
    }

    /// The SHA-256 of an empty body, hex.
    public static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    /// Payload hash value for bodies not covered by the signature.
    public static let unsignedPayload = "UNSIGNED-PAYLOAD"

    /// A request as the signer sees it. `path` is the raw (unencoded) path;
    /// `query` holds raw names and values.
    public struct Request: Sendable {
        public var method: String
        public var host: String
        public var path: String
        public var query: [(String, String)]
        public var headers: [(String, String)]
        public var payloadHash: String

        public init(method: String, host: String, path: String, query: [(String, String)] = [],
                    headers: [(String, String)] = [], payloadHash: String) {
            self.method = method; self.host = host; self.path = path
            self.query = query; self.headers = headers; self.payloadHash = payloadHash
        }
    }

    // MARK: Header signing

    /// The headers to add to `request` so that it is signed at `date`: `host`,
    /// `x-amz-date`, `x-amz-content-sha256`, `x-amz-security-token` (if any) and `authorization`.
    public func signedHeaders(for request: Request, at date: Date) -> [(String, String)] {
        let amzDate = Self.amzDate(date)
        var headers = request.headers.filter { !["authorization", "x-amz-date", "host", "x-amz-content-sha256"].contains($0.0.lowercased()) }
        headers.append(("host", request.host))
        headers.append(("x-amz-date", amzDate))
        headers.append(("x-amz-content-sha256", request.payloadHash))
        if let token = credentials.sessionToken { headers.append(("x-amz-security-token", token)) }
        var toSign = request
        toSign.headers = headers
        let canonical = canonicalRequest(toSign)
        let scope = credentialScope(date)
        let stringToSign = self.stringToSign(canonicalRequest: canonical.text, amzDate: amzDate, scope: scope)
        let signature = self.signature(stringToSign: stringToSign, date: date)
        let authorization = "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyId)/\(scope), "
            + "SignedHeaders=\(canonical.signedHeaders), Signature=\(signature)"
        return headers + [("authorization", authorization)]
    }

    // MARK: Query signing (presigned URLs)

    /// The query (raw names and values, including `X-Amz-Signature`) that
    /// presigns `request` for `expires` seconds from `date`. Only `host` is signed.
    public func presignedQuery(for request: Request, at date: Date, expires: Int) -> [(String, String)] {
        let amzDate = Self.amzDate(date)
        let scope = credentialScope(date)
        var query = request.query
        query.append(("X-Amz-Algorithm", "AWS4-HMAC-SHA256"))
        query.append(("X-Amz-Credential", "\(credentials.accessKeyId)/\(scope)"))
        query.append(("X-Amz-Date", amzDate))
        query.append(("X-Amz-Expires", String(expires)))
        if let token = credentials.sessionToken { query.append(("X-Amz-Security-Token", token)) }
        var headers = request.headers.filter { $0.0.lowercased() != "host" }
        headers.append(("host", request.host))
        query.append(("X-Amz-SignedHeaders", Self.signedHeaderNames(headers)))
        var toSign = request
        toSign.query = query
        toSign.headers = headers
        toSign.payloadHash = Self.unsignedPayload
        let canonical = canonicalRequest(toSign)
        let stringToSign = self.stringToSign(canonicalRequest: canonical.text, amzDate: amzDate, scope: scope)
        return query + [("X-Amz-Signature", signature(stringToSign: stringToSign, date: date))]
    }

    // MARK: Stages

    public struct CanonicalRequest: Sendable {
        public var text: String
        public var signedHeaders: String
    }

    public func canonicalRequest(_ r: Request) -> CanonicalRequest {
        let encoded: [(String, String)] = r.query.map { (Self.uriEncode($0.0), Self.uriEncode($0.1)) }
        let sorted = encoded.sorted { (a: (String, String), b: (String, String)) -> Bool in
            a.0 == b.0 ? a.1 < b.1 : a.0 < b.0
        }
        let query = sorted.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
        // Same-name headers are joined with commas; values are trimmed and inner runs of spaces folded.
        var grouped: [String: [String]] = [:]
        for (name, value) in r.headers {
            grouped[name.lowercased(), default: []].append(Self.foldSpaces(value))
        }
        let names = grouped.keys.sorted()
        let canonicalHeaders = names.map { "\($0):\(grouped[$0]!.joined(separator: ","))\n" }.joined()
        let signed = names.joined(separator: ";")
        let text = [r.method, Self.uriEncode(r.path, keepSlash: true), query, canonicalHeaders, signed, r.payloadHash]
            .joined(separator: "\n")
        return CanonicalRequest(text: text, signedHeaders: signed)
    }

    public func credentialScope(_ date: Date) -> String {
        "\(Self.amzDate(date).prefix(8))/\(region)/\(service)/aws4_request"
    }

    public func stringToSign(canonicalRequest: String, amzDate: String, scope: String) -> String {
        ["AWS4-HMAC-SHA256", amzDate, scope, Digest.sha256(Array(canonicalRequest.utf8)).hexString]
            .joined(separator: "\n")
    }

    public func signingKey(_ date: Date) -> [UInt8] {
        let day = String(Self.amzDate(date).prefix(8))
        let cacheKey = SigningKeyCache.Key(day: day, region: region, service: service, secret: credentials.secretAccessKey)
        if let key = Self.keyCache.key(for: cacheKey) { return key }
        let key = Self.deriveSigningKey(day: day, region: region, service: service, secret: credentials.secretAccessKey)
        Self.keyCache.store(key, for: cacheKey)
        return key
    }

    /// The four HMACs of the key derivation, which depend on the day, not the request.
    static func deriveSigningKey(day: String, region: String, service: String, secret: String) -> [UInt8] {
        let kDate = Digest.hmacSHA256(key: Array("AWS4\(secret)".utf8), Array(day.utf8))
        let kRegion = Digest.hmacSHA256(key: kDate, Array(region.utf8))
        let kService = Digest.hmacSHA256(key: kRegion, Array(service.utf8))
        return Digest.hmacSHA256(key: kService, Array("aws4_request".utf8))
    }

    public func signature(stringToSign: String, date: Date) -> String {
        Digest.hmacSHA256(key: signingKey(date), Array(stringToSign.utf8)).hexString
    }

    // MARK: Encoding

    /// `20130524T000000Z`.
    public static func amzDate(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&t, &parts)
        // Digits by hand: String(format:) goes through Foundation's formatter (a few % of a small PUT's CPU).
        var out = [UInt8]()
        out.reserveCapacity(16)
        func digits(_ value: Int32, _ count: Int) {
            var divisor: Int32 = 1
            for _ in 1..<count { divisor *= 10 }
            var v = value
            while divisor > 0 { out.append(UInt8(48 + v / divisor)); v %= divisor; divisor /= 10 }
        }
        digits(parts.tm_year + 1900, 4); digits(parts.tm_mon + 1, 2); digits(parts.tm_mday, 2)
        out.append(UInt8(ascii: "T"))
        digits(parts.tm_hour, 2); digits(parts.tm_min, 2); digits(parts.tm_sec, 2)
        out.append(UInt8(ascii: "Z"))
        return String(decoding: out, as: UTF8.self)
    }

    /// RFC 3986 percent-encoding of everything but unreserved characters (and `/` when asked).
    public static func uriEncode(_ s: String, keepSlash: Bool = false) -> String {
        var out = [UInt8]()
        out.reserveCapacity(s.utf8.count)
        let hex: [UInt8] = Array("0123456789ABCDEF".utf8)
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"),
                 UInt8(ascii: "."), UInt8(ascii: "~"):
                out.append(b)
            case UInt8(ascii: "/") where keepSlash:
                out.append(b)
            default:
                out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func signedHeaderNames(_ headers: [(String, String)]) -> String {
        Set(headers.map { $0.0.lowercased() }).sorted().joined(separator: ";")
    }

    /// A header value as SigV4 signs it: runs of spaces and tabs become one
    /// space, none at either end (botocore: `' '.join(value.split())`, for the
    /// ASCII that HTTP header values may hold). Byte by byte: Foundation's
    /// trimming bridged through NSString was a few % of a small PUT's CPU.
    static func foldSpaces(_ value: String) -> String {
        var out = [UInt8]()
        out.reserveCapacity(value.utf8.count)
        var gap = false
        for b in value.utf8 {
            if b == UInt8(ascii: " ") || b == UInt8(ascii: "\t") {
                gap = !out.isEmpty
                continue
            }
            if gap { out.append(UInt8(ascii: " ")); gap = false }
            out.append(b)
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Signing keys derived today, for the next requests with the same secret
/// (a handful: one per credential in use; emptied when it reaches 64).
final class SigningKeyCache: Sendable {
    struct Key: Hashable { var day, region, service, secret: String }
    private let keys = Mutex<[Key: [UInt8]]>([:])

    func key(for key: Key) -> [UInt8]? { keys.withLock { $0[key] } }

    func store(_ value: [UInt8], for key: Key) {
        keys.withLock { keys in
            if keys.count >= 64 { keys.removeAll() }
            keys[key] = value
        }
    }
}
