/// Who sent a request, as far as the worker can tell.
///
/// With `auth.mode none` the producer is trusted: a request that states an
/// `identityId` is an authenticated caller with that identity, one without is
/// an anonymous guest. With `auth.mode jwt` the identity comes from a verified
/// token (authenticated, or a guest identity when the token's issuer is the
/// configured guest issuer); a request without a token is an anonymous guest
/// when guests are allowed, and its stated `identityId` is not trusted.
public struct Caller: Sendable, Hashable, CustomStringConvertible {
    public var role: CallerRole
    /// The proven (or, without auth, stated) identity; nil for an anonymous guest.
    public var identityId: String?

    public init(role: CallerRole, identityId: String?) {
        self.role = role
        self.identityId = identityId.flatMap { $0.isEmpty ? nil : $0 }
    }

    public static let anonymousGuest = Caller(role: .guest, identityId: nil)

    /// The caller as `auth.mode none` sees a request: its stated identity is taken as proven.
    public static func trusted(_ request: TransferRequest) -> Caller {
        let identity = request.identityId.flatMap { $0.isEmpty ? nil : $0 }
        return Caller(role: identity == nil ? .guest : .authenticated, identityId: identity)
    }

    public var description: String {
        switch (role, identityId) {
        case (.guest, nil): return "an anonymous guest"
        case (.guest, let id?): return "guest identity \(id)"
        case (.authenticated, let id?): return "\(id)"
        case (.authenticated, nil): return "an authenticated caller"
        }
    }
}

/// What a prefix resolver is told about the request it places: it may refuse
/// (Amplify's client-side validation, enforced by the server) with its own
/// `FerryError`, which reaches the `rejected` status and the DLQ record.
public struct AccessContext: Sendable, Hashable {
    public var operation: TransferOperation
    public var accessLevel: AccessLevel
    public var caller: Caller
    public var bucket: String
    /// The user's key, before the prefix.
    public var key: String
    /// True when the key being placed is a copy's source, not its destination.
    public var isCopySource: Bool

    public init(operation: TransferOperation, accessLevel: AccessLevel, caller: Caller, bucket: String, key: String,
                isCopySource: Bool = false) {
        self.operation = operation; self.accessLevel = accessLevel; self.caller = caller
        self.bucket = bucket; self.key = key; self.isCopySource = isCopySource
    }

    /// Whether the caller proved an identity (Cognito's authenticated role).
    public var isAuthenticated: Bool { caller.role == .authenticated }
}

/// The access level and owner a full S3 key belongs to, as a layout sees it.
public struct ObjectArea: Sendable, Hashable {
    public var level: AccessLevel
    /// The owning identity (nil on the guest level).
    public var owner: String?

    public init(level: AccessLevel, owner: String?) { self.level = level; self.owner = owner }
}
