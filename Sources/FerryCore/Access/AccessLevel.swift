/// Amplify Storage's access levels. The level decides the key prefix an object
/// lives under and who may read or write it.
public enum AccessLevel: String, Sendable, Codable, CaseIterable {
    case guest, `protected`, `private`

    /// The default prefix of objects at this level, owned by `identityId`:
    /// `public/`, `protected/{identityId}/`, `private/{identityId}/`.
    public func defaultPrefix(owner identityId: String?) -> String {
        switch self {
        case .guest: return "public/"
        case .protected: return "protected/\(identityId ?? "")/"
        case .private: return "private/\(identityId ?? "")/"
        }
    }
}
