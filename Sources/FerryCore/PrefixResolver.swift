/// Maps a request's user key to the S3 key it lives at, by access level.
/// A resolver may also refuse a request (Amplify's client-side validation, server-side).
public protocol PrefixResolver: Sendable {
    /// The prefix for objects of `level` owned by `identityId`, or a `FerryError` refusing the request.
    func prefix(for level: AccessLevel, owner identityId: String?) throws(FerryError) -> String
}

extension PrefixResolver {
    /// The full S3 key of the object a request names. Reads of protected
    /// objects use the owner named by `targetIdentityId`.
    public func objectKey(for request: TransferRequest) throws(FerryError) -> String {
        let level = request.effectiveAccessLevel
        let owner: String?
        switch (request.op, level) {
        case (.download, .protected): owner = request.targetIdentityId ?? request.identityId
        default: owner = request.identityId
        }
        return try prefix(for: level, owner: owner) + request.key
    }
}

/// Amplify's default layout: `public/`, `protected/{identityId}/`, `private/{identityId}/`.
public struct DefaultPrefixResolver: PrefixResolver {
    public init() {}
    public func prefix(for level: AccessLevel, owner identityId: String?) throws(FerryError) -> String {
        if level != .guest, identityId?.isEmpty ?? true {
            throw FerryError(.invalidRequest, "accessLevel \(level.rawValue) needs an owner identity")
        }
        return level.defaultPrefix(owner: identityId)
    }
}

/// No prefix at all: keys are used as written.
public struct PassThroughPrefixResolver: PrefixResolver {
    public init() {}
    public func prefix(for level: AccessLevel, owner identityId: String?) throws(FerryError) -> String { "" }
}
