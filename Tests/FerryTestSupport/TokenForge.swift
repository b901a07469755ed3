import Foundation
import JWTKit

/// Identity tokens made any way at all, for properties of the verifier: a
/// header naming any algorithm (or none, or a repeated `alg`, or `crit`), a
/// signature made by any key with any algorithm, whether or not the two agree.
/// `TokenForge.Worker` says which keys a worker holds, and `accepts` is the
/// rule a worker must follow (RFC 8725 §3.1): a token is accepted only when a
/// key the worker holds, chosen by `kid`, allows the header's algorithm, and
/// that key signed it with that algorithm.
public struct TokenForge: Sendable {
    /// The worker's HMAC secret (64 bytes: HS256, HS384 and HS512).
    public let secret: String
    public let rsa: Insecure.RSA.PrivateKey
    public let otherRSA: Insecure.RSA.PrivateKey
    public let ec256: ES256PrivateKey
    public let ec384: ES384PrivateKey

    /// RSA keys from openssl (jwt-kit makes none).
    public static func make(directory: URL) async throws -> TokenForge {
        func rsaKey(_ name: String) async throws -> Insecure.RSA.PrivateKey {
            let path = directory.appendingPathComponent(name).path
            try await runChecked("openssl", ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path])
            return try Insecure.RSA.PrivateKey(pem: String(contentsOfFile: path, encoding: .utf8))
        }
        return TokenForge(secret: String(repeating: "ferry-token-secret-", count: 4).prefix(64).description,
                          rsa: try await rsaKey("rsa.pem"), otherRSA: try await rsaKey("other-rsa.pem"),
                          ec256: ES256PrivateKey(), ec384: ES384PrivateKey())
    }

    // MARK: Keys a worker holds

    /// A key as a worker is configured with it: its `kid` (JWKS keys only),
    /// which signing key is its private half, and the algorithms it allows.
    public struct HeldKey: Sendable {
        public var kid: String?
        public var signer: String
        public var algorithms: Set<String>
    }

    /// What a worker is given: the flag and file content, and the keys it then holds.
    public struct Worker: Sendable {
        public var name: String
        public var flag: String
        public var file: String
        public var keys: [HeldKey]
    }

    static let rsaAlgorithms: Set<String> = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"]

    /// Four workers: an HMAC secret, an RSA public key, an EC P-256 public key,
    /// and a JWKS of an RSA key (`k1`) and an EC P-384 key (`k2`).
    public var workers: [Worker] {
        get throws {
            let (n, e) = try rsa.publicKey.getKeyPrimitives()
            guard let (x, y) = ec384.publicKey.parameters else { throw TokenForgeError(description: "the P-384 key has no parameters") }
            let jwks = #"{"keys":[{"kty":"RSA","kid":"k1","n":"\#(Self.base64URL(n))","e":"\#(Self.base64URL(e))"},"#
                + #"{"kty":"EC","kid":"k2","crv":"P-384","x":"\#(x)","y":"\#(y)"}]}"#
            return [
                Worker(name: "secret", flag: "--jwt-secret-file", file: secret,
                       keys: [HeldKey(kid: nil, signer: "secret", algorithms: ["HS256", "HS384", "HS512"])]),
                Worker(name: "rsa-pem", flag: "--jwt-public-key", file: rsa.publicKey.pemRepresentation,
                       keys: [HeldKey(kid: nil, signer: "rsa", algorithms: Self.rsaAlgorithms)]),
                Worker(name: "ec-pem", flag: "--jwt-public-key", file: ec256.publicKey.pemRepresentation,
                       keys: [HeldKey(kid: nil, signer: "ec256", algorithms: ["ES256"])]),
                Worker(name: "jwks", flag: "--jwt-jwks", file: jwks,
                       keys: [HeldKey(kid: "k1", signer: "rsa", algorithms: Self.rsaAlgorithms),
                              HeldKey(kid: "k2", signer: "ec384", algorithms: ["ES384"])]),
            ]
        }
    }

    // MARK: Tokens

    /// How a token's signature is made: by which key, with which algorithm.
    public struct Signature: Sendable, Hashable, CustomStringConvertible {
        public var key: String
        public var algorithm: String
        public var description: String { "\(algorithm) by \(key)" }
    }

    /// Every way of signing: the worker's secret, another secret, and the
    /// public keys' own text used as HMAC secrets (the classic confusion),
    /// each with every HMAC; both RSA keys with every RSA algorithm; the EC
    /// keys with their curve's; and no signature at all.
    public static let signatures: [Signature] = {
        var all: [Signature] = []
        for key in ["secret", "otherSecret", "rsaPublicPEM", "rsaPublicDER", "ecPublicPEM"] {
            for algorithm in ["HS256", "HS384", "HS512"] { all.append(Signature(key: key, algorithm: algorithm)) }
        }
        for key in ["rsa", "otherRSA"] {
            for algorithm in rsaAlgorithms.sorted() { all.append(Signature(key: key, algorithm: algorithm)) }
        }
        all.append(Signature(key: "ec256", algorithm: "ES256"))
        all.append(Signature(key: "ec384", algorithm: "ES384"))
        all.append(Signature(key: "none", algorithm: "none"))
        return all
    }()

    /// What a header may say it was signed with.
    public static let headerAlgorithms = ["HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
                                          "ES256", "ES384", "ES512", "EdDSA", "none", "None", "NONE", "hs256", "RS256 ", ""]

    /// One generated token's recipe.
    public struct Case: Sendable, CustomStringConvertible {
        public var headerAlgorithm: String
        public var kid: String?
        /// A `crit` member asking for an extension.
        public var critical: Bool
        /// A second `alg` member, after the first, naming the signature's real algorithm.
        public var repeatedAlgorithm: Bool
        public var signature: Signature
        public var description: String {
            "header alg '\(headerAlgorithm)'\(kid.map { ", kid \($0)" } ?? "")\(critical ? ", crit" : "")\(repeatedAlgorithm ? ", alg twice" : ""); signed \(signature)"
        }
    }

    /// Every header algorithm with every signature (570 pairs), each with a
    /// kid, `crit` and a repeated `alg` drawn from `generator`; a header that
    /// names the signature's own algorithm comes with every kid, and with
    /// `crit` and a repeated `alg` once each: 720 cases in all.
    public static func cases(using generator: inout some RandomNumberGenerator) -> [Case] {
        let kids: [String?] = [nil, "k1", "k2", "nope"]
        var cases: [Case] = []
        for signature in signatures {
            for algorithm in headerAlgorithms {
                guard algorithm != signature.algorithm else {
                    for kid in kids { cases.append(Case(headerAlgorithm: algorithm, kid: kid, critical: false, repeatedAlgorithm: false, signature: signature)) }
                    let kid = kids.randomElement(using: &generator)!
                    cases.append(Case(headerAlgorithm: algorithm, kid: kid, critical: true, repeatedAlgorithm: false, signature: signature))
                    cases.append(Case(headerAlgorithm: algorithm, kid: kid, critical: false, repeatedAlgorithm: true, signature: signature))
                    continue
                }
                let roll = Int.random(in: 0..<10, using: &generator)
                cases.append(Case(headerAlgorithm: algorithm, kid: kids.randomElement(using: &generator)!, critical: roll == 0,
                                  repeatedAlgorithm: roll == 1, signature: signature))
            }
        }
        return cases
    }

    /// Whether a worker holding `worker`'s keys must accept the token of `c`.
    public static func accepts(_ c: Case, worker: Worker) -> Bool {
        guard !c.critical, !c.repeatedAlgorithm, c.signature.algorithm == c.headerAlgorithm else { return false }
        var candidates = worker.keys.filter { $0.kid == nil }
        if let kid = c.kid, worker.keys.contains(where: { $0.kid == kid }) {
            candidates = worker.keys.filter { $0.kid == kid }
        } else if candidates.isEmpty, worker.keys.count == 1, c.kid == nil {
            candidates = worker.keys
        }
        return candidates.contains { $0.signer == c.signature.key && $0.algorithms.contains(c.headerAlgorithm) }
    }

    /// The compact token of `c`, for `subject`, valid for ten minutes.
    public func token(_ c: Case, subject: String) async throws -> String {
        var header = #"{"alg":\#(Self.jsonString(c.headerAlgorithm)),"typ":"JWT""#
        if let kid = c.kid { header += #","kid":\#(Self.jsonString(kid))"# }
        if c.critical { header += #","crit":["exp"]"# }
        if c.repeatedAlgorithm { header += #","alg":\#(Self.jsonString(c.signature.algorithm))"# }
        header += "}"
        let claims = #"{"sub":\#(Self.jsonString(subject)),"exp":\#(Int(Date().timeIntervalSince1970) + 600)}"#
        let message = Self.base64URL(Data(header.utf8)) + "." + Self.base64URL(Data(claims.utf8))
        let signature = try await sign(Array(message.utf8), with: c.signature)
        return message + "." + Self.base64URL(Data(signature))
    }

    private func sign(_ message: [UInt8], with signature: Signature) async throws -> [UInt8] {
        if signature.key == "none" { return [] }
        let digest: DigestAlgorithm = switch signature.algorithm.suffix(3) {
        case "384": .sha384
        case "512": .sha512
        default: .sha256
        }
        let keys = JWTKeyCollection()
        switch signature.key {
        case "secret": await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: digest)
        case "otherSecret": await keys.add(hmac: HMACKey(from: String(repeating: "not-the-worker-secret-", count: 3)), digestAlgorithm: digest)
        case "rsaPublicPEM": await keys.add(hmac: HMACKey(from: rsa.publicKey.pemRepresentation), digestAlgorithm: digest)
        case "rsaPublicDER": await keys.add(hmac: HMACKey(from: rsa.publicKey.derRepresentation), digestAlgorithm: digest)
        case "ecPublicPEM": await keys.add(hmac: HMACKey(from: ec256.publicKey.pemRepresentation), digestAlgorithm: digest)
        case "rsa", "otherRSA":
            let key = signature.key == "rsa" ? rsa : otherRSA
            if signature.algorithm.hasPrefix("PS") { await keys.add(pss: key, digestAlgorithm: digest) } else { await keys.add(rsa: key, digestAlgorithm: digest) }
        case "ec256": await keys.add(ecdsa: ec256)
        case "ec384": await keys.add(ecdsa: ec384)
        default: throw TokenForgeError(description: "no signing key \(signature.key)")
        }
        return try await keys.getKey().sign(message)
    }

    static func jsonString(_ text: String) -> String {
        String(decoding: try! JSONEncoder().encode(text), as: UTF8.self)
    }

    public static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

struct TokenForgeError: Error, CustomStringConvertible {
    var description: String
}
