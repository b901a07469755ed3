/// Amplify Storage's access rules, enforced by the worker before any byte
/// moves (a producer is not trusted just because it can write to the topic):
///
/// | level | read | write / delete |
/// |---|---|---|
/// | guest | anyone | anyone |
/// | protected | anyone, naming the owner with `targetIdentityId` | the owner only |
/// | private | the owner only | the owner only |
///
/// With `auth.mode none` the `identityId` a producer states is taken as proven;
/// identity proof (JWT) is a separate step.
public enum AccessPolicy {
    /// Throws `AccessDenied` when `request` breaks a rule. `resolver` tells
    /// whose private area a copy source lies in.
    public static func authorize(_ request: TransferRequest,
                                 resolver: any PrefixResolver = DefaultPrefixResolver()) throws(FerryError) {
        let level = request.effectiveAccessLevel
        let actor = request.identityId.flatMap { $0.isEmpty ? nil : $0 }
        let target = request.targetIdentityId.flatMap { $0.isEmpty ? nil : $0 }
        switch (request.op, level) {
        case (_, .guest):
            break
        case (.download, .protected):
            guard target != nil || actor != nil else {
                throw FerryError(.accessDenied, "reading a protected object needs targetIdentityId (its owner)")
            }
        case (_, .protected), (_, .private):
            guard let actor else {
                throw FerryError(.accessDenied, "\(level.rawValue) objects can be \(request.op == .download ? "read" : "written") by their owner only; no identityId given")
            }
            if let target, target != actor {
                throw FerryError(.accessDenied, "\(actor) may not \(request.op == .download ? "read" : "write") \(level.rawValue) objects of \(target)")
            }
        }
        // A copy reads its source: private objects of others are off limits.
        if request.op == .copy, let source = request.source, source.hasPrefix("s3://") {
            let path = source.dropFirst(5).split(separator: "/", maxSplits: 1)
            if path.count == 2, let owner = resolver.privateOwner(of: String(path[1])), owner != actor {
                throw FerryError(.accessDenied, "the copy source is a private object of \(owner)")
            }
        }
    }
}
