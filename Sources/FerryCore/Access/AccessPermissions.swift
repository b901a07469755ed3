/// What a request does to an object, in Amplify Storage's CRUD terms:
/// create and update are one right (`write`), as in Amplify's CLI.
public enum AccessRight: String, Sendable, CaseIterable, Hashable {
    case read, write, delete
}

/// Who calls, as Cognito tells them apart: a caller with a proven identity
/// (authenticated role), or a guest (unauthenticated role), who may still
/// carry a guest identity of their own.
public enum CallerRole: String, Sendable, CaseIterable, Hashable {
    case guest, authenticated
}

/// Where an object lies as seen from the caller. There is no scope for
/// another identity's private objects: no setting can open them.
public enum AccessScope: String, Sendable, CaseIterable, Hashable {
    /// The guest level (`public/`).
    case guest
    /// Another identity's protected objects.
    case protected
    /// The caller's own protected objects.
    case protectedOwn
    /// The caller's own private objects.
    case privateOwn
}

/// Which rights each role has in each scope: Amplify's "what kind of access
/// do you want for authenticated / guest users", applied by the worker before
/// any byte moves. The defaults are the rules Ferry always had.
public struct AccessPermissions: Sendable, Hashable {
    private var table: [CallerRole: [AccessScope: Set<AccessRight>]]

    /// Guests: everything on the guest level, reading others' protected
    /// objects; no area of their own. Authenticated callers: the same, plus
    /// everything in their own protected and private areas.
    public static let defaults = AccessPermissions(table: [
        .guest: [.guest: [.read, .write, .delete], .protected: [.read], .protectedOwn: [], .privateOwn: []],
        .authenticated: [.guest: [.read, .write, .delete], .protected: [.read],
                         .protectedOwn: [.read, .write, .delete], .privateOwn: [.read, .write, .delete]],
    ])

    private init(table: [CallerRole: [AccessScope: Set<AccessRight>]]) { self.table = table }

    public init() { self = .defaults }

    public func allows(_ role: CallerRole, _ right: AccessRight, in scope: AccessScope) -> Bool {
        table[role]?[scope]?.contains(right) ?? false
    }

    public func rights(of role: CallerRole, in scope: AccessScope) -> Set<AccessRight> {
        table[role]?[scope] ?? []
    }

    public mutating func set(_ rights: Set<AccessRight>, for role: CallerRole, in scope: AccessScope) {
        table[role, default: [:]][scope] = rights
    }

    /// Applies `SCOPE=RIGHTS` items to `role` (the configuration's
    /// `access.guestPermissions` / `access.authenticatedPermissions`, the
    /// `--guest-permission` / `--authenticated-permission` flags), e.g.
    /// `guest=read`, `protected=read`, `privateOwn=read+write+delete`,
    /// `guest=none`. Rights are joined by `+`, `|` or spaces. Scopes not named
    /// keep their defaults.
    public mutating func apply(_ items: [String], to role: CallerRole) throws(ConfigurationError) {
        for item in items {
            guard let eq = item.firstIndex(of: "=") else {
                throw ConfigurationError("permission '\(Self.shown(item))' must be SCOPE=RIGHTS, e.g. guest=read+write")
            }
            let name = item[..<eq].trimmingCharacters(in: .whitespaces)
            guard let scope = AccessScope.allCases.first(where: { $0.rawValue.lowercased() == name.lowercased() }) else {
                throw ConfigurationError("unknown permission scope '\(Self.shown(name))' in '\(Self.shown(item))'; scopes: "
                    + AccessScope.allCases.map(\.rawValue).joined(separator: ", ")
                    + " (others' private objects are never accessible)")
            }
            let words = item[item.index(after: eq)...].split(whereSeparator: { $0 == "+" || $0 == "|" || $0 == " " || $0 == "," })
            var rights: Set<AccessRight> = []
            for word in words where word.lowercased() != "none" {
                guard let right = AccessRight(rawValue: word.lowercased()) else {
                    throw ConfigurationError("unknown right '\(Self.shown(word))' in '\(Self.shown(item))'; rights: read, write, delete (or none)")
                }
                rights.insert(right)
            }
            set(rights, for: role, in: scope)
        }
    }

    /// A refused value as its message repeats it: clipped, since a file may hold any length.
    private static func shown(_ value: some StringProtocol) -> String { TextClip.clipped(String(value), toUTF8: 80) }

    /// `guest=read+write+delete protected=read …` for one role, in scope order.
    public func summary(of role: CallerRole) -> String {
        AccessScope.allCases.map { scope in
            let granted = self.rights(of: role, in: scope)
            let names = AccessRight.allCases.filter(granted.contains).map(\.rawValue)
            return "\(scope.rawValue)=\(names.isEmpty ? "none" : names.joined(separator: "+"))"
        }.joined(separator: " ")
    }
}
