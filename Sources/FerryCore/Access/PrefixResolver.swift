/// Maps a request's user key to the S3 key it lives at, by access level, and
/// tells which level and owner a full key belongs to. A resolver may also
/// refuse a request (Amplify's client-side validation, server-side).
public protocol PrefixResolver: Sendable {
    /// The prefix for objects of `level` owned by `identityId`, or a `FerryError` refusing the request.
    func prefix(for level: AccessLevel, owner identityId: String?) throws(FerryError) -> String
    /// The same, knowing the request: the operation, the caller (and whether
    /// they are authenticated), the bucket and the user key. The default calls
    /// `prefix(for:owner:)`; implement it to refuse by context.
    func prefix(for level: AccessLevel, owner identityId: String?, context: AccessContext) throws(FerryError) -> String
    /// The level and owner of a full S3 key, or nil when it lies in no level's
    /// area. Copy sources given as full keys are judged by it.
    func area(of key: String) -> ObjectArea?
}

extension PrefixResolver {
    public func prefix(for level: AccessLevel, owner identityId: String?, context: AccessContext) throws(FerryError) -> String {
        try prefix(for: level, owner: identityId)
    }

    /// The owner of `key` when it lies in some identity's private area (nil otherwise).
    public func privateOwner(of key: String) -> String? {
        guard let area = area(of: key), area.level == .private else { return nil }
        return area.owner
    }

    /// The full S3 key of the object a request names, as `caller` places it.
    public func objectKey(for request: TransferRequest, caller: Caller) throws(FerryError) -> String {
        let level = request.effectiveAccessLevel
        let context = AccessContext(operation: request.op, accessLevel: level, caller: caller, bucket: request.bucket, key: request.key)
        return try prefix(for: level, owner: AccessPolicy.owner(of: request), context: context) + request.key
    }

    /// The full S3 key of the object a request names, for a caller whose stated identity is trusted.
    public func objectKey(for request: TransferRequest) throws(FerryError) -> String {
        try objectKey(for: request, caller: .trusted(request))
    }
}

/// Prefixes from templates, one per level; `{identityId}` stands for the owner.
/// Amplify's default layout is `public/`, `protected/{identityId}/`, `private/{identityId}/`.
public struct TemplatePrefixResolver: PrefixResolver, Hashable {
    public let guest: String
    public let protected: String
    public let `private`: String

    /// Protected and private templates must name the owner, or owners would share one area.
    public init(guest: String = "public/", protected: String = "protected/{identityId}/",
                private: String = "private/{identityId}/") throws(ConfigurationError) {
        for (level, template) in [("protected", protected), ("private", `private`)] where !template.contains("{identityId}") {
            throw ConfigurationError("the \(level) prefix template '\(template)' must contain {identityId}")
        }
        guard protected != `private`, !guest.contains("{identityId}") else {
            throw ConfigurationError("prefix templates must keep the levels apart and the guest prefix may not name an identity")
        }
        if let overlap = Self.overlap(guest: guest, protected: protected, private: `private`) { throw ConfigurationError(overlap) }
        // Every key built from a template must pass the key rule (no dot or empty segments).
        for (level, template) in [("guest", guest), ("protected", protected), ("private", `private`)] {
            let sample = template.replacingOccurrences(of: "{identityId}", with: "id") + "key"
            if let problem = ObjectKeyRule.violation(of: sample, field: "the \(level) prefix template '\(template)'") {
                throw ConfigurationError(problem.message)
            }
        }
        self.guest = guest
        self.protected = protected
        self.private = `private`
    }

    /// Why keys of two levels (or of two owners) could coincide, or nil when
    /// they never can. A guest key is the guest prefix plus any user key; an
    /// owned key is the template's head, an identity (no '/'), its tail and a
    /// user key. So a head that is a prefix of the guest prefix, or the other
    /// way round, lets one level address the other (an empty guest prefix
    /// overlaps everything); protected and private may share a head only
    /// when their tails start with '/' and part before either ends.
    static func overlap(guest: String, protected: String, private: String) -> String? {
        func split(_ template: String) -> (head: String, tail: String) {
            let parts = template.components(separatedBy: "{identityId}")
            return (parts[0], parts.dropFirst().joined(separator: "{identityId}"))
        }
        let owned = [("protected", protected, split(protected)), ("private", `private`, split(`private`))]
        for (level, template, (head, _)) in owned where guest.hasBytePrefix(head) || head.hasBytePrefix(guest) {
            return "the guest prefix '\(guest)' and the \(level) template '\(template)' overlap: a guest key could address "
                + "another level's objects (use --prefix-passthrough if levels are meant to be labels only)"
        }
        let (p, r) = (owned[0].2, owned[1].2)
        let apart = p.head == r.head
            ? p.tail.hasBytePrefix("/") && r.tail.hasBytePrefix("/") && !p.tail.hasBytePrefix(r.tail) && !r.tail.hasBytePrefix(p.tail)
            : !p.head.hasBytePrefix(r.head) && !r.head.hasBytePrefix(p.head)
        return apart ? nil : "the protected template '\(protected)' and the private template '\(`private`)' overlap: "
            + "one identity's protected key could be another's private key"
    }

    public func prefix(for level: AccessLevel, owner identityId: String?) throws(FerryError) -> String {
        if level == .guest { return guest }
        guard let identityId, !identityId.isEmpty else {
            throw FerryError(.invalidRequest, "accessLevel \(level.rawValue) needs an owner identity")
        }
        if let problem = IdentityRule.violation(of: identityId, field: "identityId") { throw problem }
        return (level == .protected ? protected : `private`).replacingOccurrences(of: "{identityId}", with: identityId)
    }

    public func area(of key: String) -> ObjectArea? {
        // By bytes, as S3 tells keys apart: a key canonically equal to another's
        // prefix but not byte-equal (a Kelvin sign for a K) is not in its area.
        if key.hasBytePrefix(guest) { return ObjectArea(level: .guest, owner: nil) }
        for (level, template) in [(AccessLevel.protected, protected), (.private, `private`)] {
            let parts = template.components(separatedBy: "{identityId}")
            guard parts.count == 2, key.hasBytePrefix(parts[0]) else { continue }
            let rest = key.droppingBytes(parts[0].utf8.count)
            // An identity holds no '/': the shortest one inside the first segment that the tail follows.
            let segment = rest.prefix { $0 != "/" }
            for length in stride(from: 1, through: segment.count, by: 1) where rest.dropFirst(length).hasBytePrefix(parts[1]) {
                let owner = String(segment.prefix(length))
                if IdentityRule.violation(of: owner, field: "identityId") == nil { return ObjectArea(level: level, owner: owner) }
            }
        }
        return nil
    }
}

/// Amplify's default layout: `public/`, `protected/{identityId}/`, `private/{identityId}/`.
public struct DefaultPrefixResolver: PrefixResolver {
    private let templates = try! TemplatePrefixResolver()  // the defaults are valid
    public init() {}
    public func prefix(for level: AccessLevel, owner identityId: String?) throws(FerryError) -> String {
        try templates.prefix(for: level, owner: identityId)
    }
    public func area(of key: String) -> ObjectArea? { templates.area(of: key) }
}

/// No prefix at all: keys are used as written. Levels are labels only: every
/// key is in one shared area, judged as the guest level.
public struct PassThroughPrefixResolver: PrefixResolver {
    public init() {}
    public func prefix(for level: AccessLevel, owner identityId: String?) throws(FerryError) -> String { "" }
    public func area(of key: String) -> ObjectArea? { ObjectArea(level: .guest, owner: nil) }
}
