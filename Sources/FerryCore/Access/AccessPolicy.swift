/// Amplify Storage's access rules, applied by the worker before any byte moves
/// (a producer is not trusted just because it can write to the topic).
///
/// Every request reads, writes or deletes an object in one *scope* (the guest
/// level, another identity's protected area, the caller's own protected or
/// private area); `permissions` says which rights each caller role has there.
/// Another identity's private objects are never in reach. A copy is a read of
/// its source plus a write of its destination, and reads only from the
/// request's bucket and `copySourceBuckets`.
public struct AccessPolicy: Sendable {
    public var permissions: AccessPermissions
    /// Buckets a copy may read besides the request's own; nil allows any bucket the worker can read.
    public var copySourceBuckets: Set<String>?
    public var resolver: any PrefixResolver

    public init(permissions: AccessPermissions = .defaults, copySourceBuckets: Set<String>? = [],
                resolver: any PrefixResolver = DefaultPrefixResolver()) {
        self.permissions = permissions
        self.copySourceBuckets = copySourceBuckets
        self.resolver = resolver
    }

    /// Where an allowed request acts.
    public struct Decision: Sendable, Hashable {
        /// The full S3 key of the request's object (its prefix included).
        public var objectKey: String
        /// For a copy: the bucket and full key it reads.
        public var copySourceBucket: String?
        public var copySourceKey: String?

        init(objectKey: String) { self.objectKey = objectKey }
    }

    /// Throws `AccessDenied` (naming the rule) when `caller` may not do what
    /// `request` asks, or the resolver's refusal; otherwise where it acts.
    public func authorize(_ request: TransferRequest, caller: Caller) throws(FerryError) -> Decision {
        let level = request.effectiveAccessLevel
        let owner = Self.owner(of: request)
        // Naming another owner is reading their protected objects, or nothing:
        // never silently acting on the caller's own area instead.
        if level != .guest, !(request.op == .download && level == .protected),
           let target = request.targetIdentityId, !target.isEmpty, target != owner {
            throw FerryError(.accessDenied, "s3://\(request.bucket)/\(request.key): \(level.rawValue) objects of \(target) can be "
                + "\(request.op == .download ? "read" : "written or deleted") by their owner only, and the request acts as \(owner ?? "nobody")")
        }
        let right: AccessRight = switch request.op {
        case .download: .read
        case .delete: .delete
        case .upload, .copy: .write
        }
        try check(right, level: level, owner: owner, caller: caller, object: "s3://\(request.bucket)/\(request.key)")
        let context = AccessContext(operation: request.op, accessLevel: level, caller: caller, bucket: request.bucket, key: request.key)
        var decision = Decision(objectKey: try resolver.prefix(for: level, owner: owner, context: context) + request.key)
        if request.op == .copy {
            (decision.copySourceBucket, decision.copySourceKey) = try copySource(of: request, caller: caller)
        }
        return decision
    }

    /// The owner of the object a request names: reads of protected objects
    /// name it with `targetIdentityId` (the reader's own area when absent);
    /// everything else acts in the area of `identityId`. On the guest level it
    /// owns nothing, but a resolver is still told who acts (it may place
    /// guest keys per tenant).
    public static func owner(of request: TransferRequest) -> String? {
        let owner: String? = switch (request.op, request.effectiveAccessLevel) {
        case (.download, .protected): request.targetIdentityId.flatMap { $0.isEmpty ? nil : $0 } ?? request.identityId
        default: request.identityId
        }
        return owner.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// A copy reads its source: `sourceAccessLevel` (+ `sourceIdentityId`)
    /// with a user key, as Amplify's `Storage.copy` names it, or a full key
    /// whose level and owner the layout tells.
    private func copySource(of request: TransferRequest, caller: Caller) throws(FerryError) -> (bucket: String, key: String) {
        guard let uri = request.source, uri.hasPrefix("s3://"), case let rest = uri.dropFirst(5),
              let slash = rest.firstIndex(of: "/") else {
            throw FerryError(.invalidRequest, "copy needs a source s3://bucket/key")
        }
        let bucket = String(rest[..<slash])
        let key = String(rest[rest.index(after: slash)...])
        if bucket != request.bucket, let allowed = copySourceBuckets, !allowed.contains(bucket) {
            throw FerryError(.accessDenied, "copies may not read bucket \(bucket) (rule access.copySourceBuckets: "
                + "the request's own bucket\(allowed.isEmpty ? "" : " and " + allowed.sorted().joined(separator: ", ")))")
        }
        let what = "copy source s3://\(bucket)/\(key)"
        if let level = request.sourceAccessLevel {
            let owner = level == .guest ? nil : (request.sourceIdentityId.flatMap { $0.isEmpty ? nil : $0 } ?? caller.identityId)
            try check(.read, level: level, owner: owner, caller: caller, object: what)
            let context = AccessContext(operation: .copy, accessLevel: level, caller: caller, bucket: bucket, key: key, isCopySource: true)
            return (bucket, try resolver.prefix(for: level, owner: owner, context: context) + key)
        }
        guard let area = resolver.area(of: key) else {
            throw FerryError(.accessDenied, "\(what) lies in no access level's area; name it by sourceAccessLevel "
                + "(and sourceIdentityId) and its user key")
        }
        try check(.read, level: area.level, owner: area.owner, caller: caller, object: what)
        return (bucket, key)
    }

    private func check(_ right: AccessRight, level: AccessLevel, owner: String?, caller: Caller, object: String) throws(FerryError) {
        let scope: AccessScope
        switch level {
        case .guest:
            scope = .guest
        case .protected:
            guard let owner else { throw FerryError(.accessDenied, "\(object): protected objects need their owner (identityId, or targetIdentityId to read)") }
            scope = owner == caller.identityId ? .protectedOwn : .protected
        case .private:
            guard let owner, owner == caller.identityId else {
                throw FerryError(.accessDenied, "\(object): private objects\(owner.map { " of \($0)" } ?? "") are for their owner only, "
                    + "and \(caller) is not \(owner ?? "their owner") (rule: private objects are never shared)")
            }
            scope = .privateOwn
        }
        guard permissions.allows(caller.role, right, in: scope) else {
            let area = switch scope {
            case .guest: "guest-level objects"
            case .protected: "protected objects of \(owner ?? "others")"
            case .protectedOwn: "their own protected objects"
            case .privateOwn: "their own private objects"
            }
            let setting = caller.role == .guest ? "access.guestPermissions" : "access.authenticatedPermissions"
            let rights = permissions.rights(of: caller.role, in: scope)
            let allowed = AccessRight.allCases.filter(rights.contains).map(\.rawValue).joined(separator: "+")
            throw FerryError(.accessDenied, "\(object): \(caller) (\(caller.role.rawValue) role) may not \(right.rawValue) \(area) "
                + "(rule \(setting): \(scope.rawValue)=\(allowed.isEmpty ? "none" : allowed))")
        }
    }
}
