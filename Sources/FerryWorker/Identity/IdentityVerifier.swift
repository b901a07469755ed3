import FerryCore
import Foundation
import JWTKit

/// How a worker learns who sends a request. `none` trusts the producer's
/// `identityId` (trusted producers only): a request naming one is an
/// authenticated caller, one without is a guest. `jwt` needs the request's
/// `auth` to be a token, signed by a configured key, whose identity claim
/// equals `identityId`; with `allowGuests`, a request without a token is
/// served as an anonymous guest (its `identityId` is not trusted), and a token
/// from `guestIssuer` proves a guest identity (Cognito's unauthenticated role).
public struct AuthConfiguration: Sendable {
    public enum Mode: String, Sendable { case none, jwt }

    public var mode: Mode = .none
    /// HMAC shared secret (tokens signed HS256, HS384 or HS512).
    public var hmacSecret: String?
    /// An RSA (RS256…512, PS256…512) or EC (ES256 on P-256, ES384, ES512) public key, PEM.
    public var publicKeyPEM: String?
    /// A JSON Web Key Set (RSA, EC and Ed25519 keys, selected by `kid`; a key's own `alg` narrows it to that one).
    public var jwksJSON: String?
    /// Required `iss`, when set.
    public var issuer: String?
    /// Required `aud` member, when set.
    public var audience: String?
    /// The claim that names the identity (default `sub`).
    public var identityClaim = "sub"
    /// Clock skew tolerated on `exp` and `nbf`.
    public var leewaySeconds: Double = 60
    /// With `jwt`: requests without a token are served as anonymous guests
    /// (otherwise refused).
    public var allowGuests = false
    /// With `jwt`: tokens whose `iss` is this prove a guest identity, not an
    /// authenticated one (e.g. a separate issuer for unauthenticated identities).
    public var guestIssuer: String?

    public init() {}
}

/// Checks identity proof: the token's header first (`TokenHeader`: strict
/// JSON, no `crit`), then its signature with a key allowed for its `alg`
/// (`TokenKeys`; `none` never), then `exp` (required), `nbf`, `iss`, `aud`,
/// and the identity claim against the request's `identityId`.
public final class IdentityVerifier: Sendable {
    public let configuration: AuthConfiguration
    private let keys: TokenKeys?

    public init(_ configuration: AuthConfiguration) async throws(ConfigurationError) {
        self.configuration = configuration
        guard configuration.mode == .jwt else {
            keys = nil
            return
        }
        if configuration.guestIssuer != nil, configuration.guestIssuer == configuration.issuer {
            throw ConfigurationError("auth.guestIssuer must differ from auth.jwtIssuer: tokens of one issuer cannot be both guests and authenticated")
        }
        keys = try await TokenKeys(configuration)
    }

    /// Who sent `request`, or `AccessDenied` when its proof is missing or wrong.
    /// A token that is present but invalid is refused, never downgraded to a guest.
    public func caller(of request: TransferRequest, now: Date = Date()) async throws(FerryError) -> Caller {
        guard configuration.mode == .jwt else { return .trusted(request) }
        guard let token = request.auth, !token.isEmpty else {
            if configuration.allowGuests { return .anonymousGuest }
            throw FerryError(.accessDenied, "this worker requires identity proof: a JWT in 'auth' (guests are not allowed: auth.allowGuests)")
        }
        guard let identityId = request.identityId, !identityId.isEmpty else {
            throw FerryError(.accessDenied, "identityId is required with identity proof")
        }
        guard let keys else { throw FerryError(.accessDenied, "identity token refused: this worker has no key") }
        let claims = try await keys.verify(token)
        let skew = configuration.leewaySeconds
        guard let exp = claims.exp else { throw FerryError(.accessDenied, "identity token refused: no exp claim") }
        guard exp.value.addingTimeInterval(skew) > now else { throw FerryError(.accessDenied, "identity token refused: expired") }
        if let nbf = claims.nbf, nbf.value.addingTimeInterval(-skew) > now {
            throw FerryError(.accessDenied, "identity token refused: not valid yet (nbf)")
        }
        let isGuestToken = configuration.guestIssuer != nil && claims.iss?.value == configuration.guestIssuer
        if !isGuestToken, let issuer = configuration.issuer, claims.iss?.value != issuer {
            throw FerryError(.accessDenied, "identity token refused: issuer is not \(issuer)")
        }
        if let audience = configuration.audience, !(claims.aud?.value.contains(audience) ?? false) {
            throw FerryError(.accessDenied, "identity token refused: audience does not include \(audience)")
        }
        guard claims.strings[configuration.identityClaim] == identityId else {
            throw FerryError(.accessDenied, "identity token is for another identity than \(identityId)")
        }
        return Caller(role: isGuestToken ? .guest : .authenticated, identityId: identityId)
    }
}

/// The claims Ferry reads; any string claim can name the identity.
struct FerryClaims: JWTPayload {
    var exp: ExpirationClaim?
    var nbf: NotBeforeClaim?
    var iss: IssuerClaim?
    var aud: AudienceClaim?
    /// Every string-valued claim, by name (`sub` among them).
    var strings: [String: String]

    private struct Name: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Name.self)
        exp = try container.decodeIfPresent(ExpirationClaim.self, forKey: Name(stringValue: "exp"))
        nbf = try container.decodeIfPresent(NotBeforeClaim.self, forKey: Name(stringValue: "nbf"))
        iss = try container.decodeIfPresent(IssuerClaim.self, forKey: Name(stringValue: "iss"))
        aud = try container.decodeIfPresent(AudienceClaim.self, forKey: Name(stringValue: "aud"))
        var strings: [String: String] = [:]
        for key in container.allKeys {
            if let value = try? container.decode(String.self, forKey: key) { strings[key.stringValue] = value }
        }
        self.strings = strings
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Name.self)
        try container.encodeIfPresent(exp, forKey: Name(stringValue: "exp"))
        try container.encodeIfPresent(nbf, forKey: Name(stringValue: "nbf"))
        try container.encodeIfPresent(iss, forKey: Name(stringValue: "iss"))
        try container.encodeIfPresent(aud, forKey: Name(stringValue: "aud"))
        for (name, value) in strings where !["iss"].contains(name) { try container.encode(value, forKey: Name(stringValue: name)) }
    }

    /// Time claims are checked by `IdentityVerifier` with its leeway.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
