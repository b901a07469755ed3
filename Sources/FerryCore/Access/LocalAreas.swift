/// How a worker's data root is shared among callers.
public enum DataRootLayout: String, Sendable, CaseIterable {
    /// Every request may name any file under the root: for trusted producers
    /// only (`auth.mode none`).
    case shared
    /// The root is laid out like the access levels, and a request's local
    /// files must lie in an area its caller may use (`LocalAreas`).
    case accessLevels = "access-levels"
}

/// The parts of the data root one caller may read and write, laid out like
/// Amplify's access levels and judged by the same permissions as objects:
///
/// | path under the data root | scope |
/// |---|---|
/// | `public/…` | guest level |
/// | `protected/{identityId}/…` | the caller's own protected area, or another identity's |
/// | `private/{identityId}/…` | the caller's own private area; another's never |
///
/// An upload's source is *read*, a download's destination *written*. Any other
/// path (the root itself, a file directly in `public/`'s parent, Ferry's own
/// directories, another identity's private area) is in no area the caller has.
public struct LocalAreas: Sendable, Hashable {
    public var caller: Caller
    public var permissions: AccessPermissions

    public init(caller: Caller, permissions: AccessPermissions) {
        self.caller = caller
        self.permissions = permissions
    }

    /// The area directories, as docs/security.md names them.
    public static let publicDirectory = "public", protectedDirectory = "protected", privateDirectory = "private"

    /// `AccessDenied` naming the rule unless the caller may `right` the file
    /// at `components` (its path below the data root, without `.` or `..`).
    /// `path` names the file in the refusal.
    public func check(_ right: AccessRight, _ components: [String], path: String) throws(FerryError) {
        let scope: AccessScope
        switch (components.first, components.count) {
        case (Self.publicDirectory, 2...):
            scope = .guest
        case (Self.protectedDirectory, 3...):
            scope = components[1] == caller.identityId ? .protectedOwn : .protected
        case (Self.privateDirectory, 3...):
            guard components[1] == caller.identityId else {
                throw FerryError(.accessDenied, "\(path) lies in the private area of \(components[1].prefix(256)), and \(caller) is not its owner "
                    + "(rule: private files are never shared)")
            }
            scope = .privateOwn
        default:
            throw FerryError(.accessDenied, "\(path) lies in no access area of the data root; a request's local files must be under "
                + "public/, protected/<identityId>/ or private/<identityId>/ (worker.dataRootLayout access-levels)")
        }
        guard permissions.allows(caller.role, right, in: scope) else {
            let area = switch scope {
            case .guest: "the public area"
            case .protected: "the protected area of \(components[1].prefix(256))"
            case .protectedOwn: "their own protected area"
            case .privateOwn: "their own private area"
            }
            let verb = right == .read ? "read files of" : "write files into"
            throw FerryError(.accessDenied, "\(path): \(caller) (\(caller.role.rawValue) role) may not \(verb) \(area) "
                + "(the access permissions of \(scope.rawValue) apply to the data root's areas too)")
        }
    }
}
