import FerryCore
import Foundation
import JWTKit

/// The keys a worker verifies identity tokens with, each bound to the
/// algorithms its type allows (RFC 8725 §3.1: the algorithm is checked
/// against the key, never taken from the token alone):
///
/// | key | algorithms |
/// |---|---|
/// | `auth.hmacSecret` | HS256; HS384 from 48 bytes, HS512 from 64 |
/// | RSA public key (PEM or JWK) | RS256, RS384, RS512, PS256, PS384, PS512 |
/// | EC public key | ES256 (P-256), ES384 (P-384), ES512 (P-521) |
/// | Ed25519 JWK | EdDSA |
///
/// A JWK that names its `alg` allows that one only. `none` is allowed for no
/// key. Each (key, algorithm) pair has a verifier of its own, holding only that
/// key for only that algorithm, so jwt-kit is never left to pick a key or an
/// algorithm from what the token says.
struct TokenKeys: Sendable {
    struct Key: Sendable {
        /// `kid`. Keys of a JWKS have one; a secret or a PEM key has none and
        /// takes tokens whatever `kid` they name.
        let id: String?
        /// What the key is, for refusals ("the HMAC secret", "JWKS key k1 (RSA)").
        let name: String
        /// One verifier per algorithm the key may be used with.
        let verifiers: [String: JWTKeyCollection]

        var algorithms: String { verifiers.keys.sorted().joined(separator: ", ") }
    }

    let keys: [Key]

    init(_ configuration: AuthConfiguration) async throws(ConfigurationError) {
        var keys: [Key] = []
        if let secret = configuration.hmacSecret {
            keys.append(try await Self.hmacKey(secret))
        }
        if let pem = configuration.publicKeyPEM {
            keys.append(try await Self.pemKey(pem))
        }
        if let jwks = configuration.jwksJSON {
            keys += try await Self.jwksKeys(jwks)
        }
        guard !keys.isEmpty else { throw ConfigurationError("auth mode jwt needs a key: an HMAC secret, a public key PEM or a JWKS file") }
        self.keys = keys
    }

    /// The claims of `token` once a key allowed for its `alg` verified its
    /// signature; `AccessDenied` with the reason otherwise.
    func verify(_ token: String) async throws(FerryError) -> FerryClaims {
        let header = try TokenHeader(token: token)
        let allowing = try candidates(for: header).filter { $0.verifiers[header.algorithm] != nil }
        for key in allowing {
            if let claims = try? await key.verifiers[header.algorithm]!.verify(token, as: FerryClaims.self) { return claims }
        }
        throw TokenHeader.refusal("bad signature")
    }

    /// The keys that may verify a token with `header`, refusing when none may
    /// or none allows its algorithm. A `kid` that a key has picks that key;
    /// otherwise the keys without a `kid` are asked, or the only key there is.
    private func candidates(for header: TokenHeader) throws(FerryError) -> [Key] {
        var candidates = keys.filter { $0.id == nil }
        if let kid = header.keyId, keys.contains(where: { $0.id == kid }) {
            candidates = keys.filter { $0.id == kid }
        } else if candidates.isEmpty, keys.count == 1, header.keyId == nil {
            candidates = keys
        }
        guard !candidates.isEmpty else {
            if let kid = header.keyId { throw TokenHeader.refusal("no key of this worker has kid \(kid)") }
            throw TokenHeader.refusal("it names no kid, and this worker has \(keys.count) keys, each with its own kid")
        }
        guard candidates.contains(where: { $0.verifiers[header.algorithm] != nil }) else {
            let allowed = candidates.map { "\($0.name) allows \($0.algorithms)" }.joined(separator: "; ")
            throw TokenHeader.refusal("token algorithm \(header.algorithm) not allowed for this key (\(allowed))")
        }
        return candidates
    }

    // MARK: Building the table

    /// An HMAC key at least as long as its hash's output (RFC 7518 §3.2): a
    /// secret of 32 bytes allows HS256, of 48 also HS384, of 64 also HS512.
    private static func hmacKey(_ secret: String) async throws(ConfigurationError) -> Key {
        let length = secret.utf8.count
        guard length >= 32 else {
            throw ConfigurationError("the JWT secret is \(length) bytes; HS256 needs at least 32 (RFC 7518 §3.2)")
        }
        var verifiers: [String: JWTKeyCollection] = [:]
        for (name, digest, bytes) in [("HS256", DigestAlgorithm.sha256, 32), ("HS384", .sha384, 48), ("HS512", .sha512, 64)] where length >= bytes {
            verifiers[name] = await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: digest)
        }
        return Key(id: nil, name: "the HMAC secret", verifiers: verifiers)
    }

    private static func pemKey(_ pem: String) async throws(ConfigurationError) -> Key {
        if let rsa = try? Insecure.RSA.PublicKey(pem: pem) {
            return Key(id: nil, name: "the RSA public key", verifiers: await rsaVerifiers(rsa))
        }
        if let key = try? ES256PublicKey(pem: pem) {
            return Key(id: nil, name: "the EC P-256 public key", verifiers: ["ES256": await JWTKeyCollection().add(ecdsa: key)])
        }
        if let key = try? ES384PublicKey(pem: pem) {
            return Key(id: nil, name: "the EC P-384 public key", verifiers: ["ES384": await JWTKeyCollection().add(ecdsa: key)])
        }
        if let key = try? ES512PublicKey(pem: pem) {
            return Key(id: nil, name: "the EC P-521 public key", verifiers: ["ES512": await JWTKeyCollection().add(ecdsa: key)])
        }
        throw ConfigurationError("cannot load the JWT public key: it is neither an RSA key (2048 bits or more) nor an EC key on P-256, P-384 or P-521, in PEM")
    }

    private static func rsaVerifiers(_ key: Insecure.RSA.PublicKey) async -> [String: JWTKeyCollection] {
        var verifiers: [String: JWTKeyCollection] = [:]
        for (bits, digest) in [("256", DigestAlgorithm.sha256), ("384", .sha384), ("512", .sha512)] {
            verifiers["RS" + bits] = await JWTKeyCollection().add(rsa: key, digestAlgorithm: digest)
            verifiers["PS" + bits] = await JWTKeyCollection().add(pss: key, digestAlgorithm: digest)
        }
        return verifiers
    }

    /// Every signing key of a JWKS, with the algorithms its type (or its own
    /// `alg`) allows. Kids must be unique; a key without one is named by its place.
    private static func jwksKeys(_ json: String) async throws(ConfigurationError) -> [Key] {
        let set: JWKS
        do {
            set = try JSONDecoder().decode(JWKS.self, from: Data(json.utf8))
        } catch {
            throw ConfigurationError("cannot read the JWKS: \(error)")
        }
        var keys: [Key] = []
        for (index, jwk) in set.keys.enumerated() {
            let kid = jwk.keyIdentifier?.string
            if let kid, keys.contains(where: { $0.id == kid }) { throw ConfigurationError("the JWKS names kid \(kid) twice") }
            var allowed = algorithms(for: jwk)
            if let named = jwk.algorithm?.rawValue { allowed = allowed.filter { $0 == named } }
            let name = "JWKS key \(kid ?? "#\(index + 1)") (\(jwk.keyType.rawValue))"
            guard !allowed.isEmpty else { continue }
            var verifiers: [String: JWTKeyCollection] = [:]
            for algorithm in allowed {
                var bound = jwk
                bound.algorithm = JWK.Algorithm(rawValue: algorithm)
                // jwt-kit files a JWK under its kid; the collection holds this one only.
                bound.keyIdentifier = JWKIdentifier(string: kid ?? "key-\(index + 1)")
                do {
                    verifiers[algorithm] = try await JWTKeyCollection().add(jwk: bound)
                } catch {
                    throw ConfigurationError("cannot load \(name) for \(algorithm): \(error)")
                }
            }
            keys.append(Key(id: kid, name: name, verifiers: verifiers))
        }
        guard !keys.isEmpty else { throw ConfigurationError("the JWKS holds no signing key Ferry can use (RSA, EC or Ed25519)") }
        return keys
    }

    private static func algorithms(for jwk: JWK) -> [String] {
        switch jwk.keyType.rawValue {
        case "RSA": return ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"]
        case "EC":
            switch jwk.curve?.rawValue {
            case "P-256": return ["ES256"]
            case "P-384": return ["ES384"]
            case "P-521": return ["ES512"]
            default: return []
            }
        case "OKP": return jwk.curve?.rawValue == "Ed25519" ? ["EdDSA"] : []
        default: return []
        }
    }
}
