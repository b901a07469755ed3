import FerryCore
import Synchronization

/// Whether a store refuses a PUT carrying `If-None-Match: *` when the key
/// already holds an object (HTTP 412). Where it does, a worker's upload is one
/// request in the common case, a new key: the PUT itself says the key was
/// empty, which is the stream record's missing old image. Where it might
/// not, the worker asks first with a HEAD (one more request per upload).
///
/// AWS S3 (since August 2024), Ceph RGW (checked: 16.2), moto (checked: 5.2)
/// and the local store refuse; a store that ignored the header would
/// overwrite silently and the record would lose its old image. So `auto`
/// trusts AWS and the local store, and learns it of any other store from the
/// first overwrite it meets anyway: that PUT goes out with the header, and a
/// 412 proves the store checks it (the PUT is then sent again without),
/// while a success proves it does not (the overwrite was wanted: no harm).
public final class ConditionalWrites: Sendable {
    public enum Mode: String, Sendable, CaseIterable {
        /// Trusted for AWS and the local store; learned for any other store.
        case auto
        /// Always trusted (the operator knows the store).
        case on
        /// Never used: a HEAD before every upload, as stores without the check need.
        case off
    }

    private enum Knowledge { case unknown, enforced, ignored }

    private let knowledge: Mutex<Knowledge>

    /// `trusted`: `auto` may assume the store checks the header (AWS, the local store).
    public init(_ mode: Mode, trusted: Bool = false) {
        let start: Knowledge = switch mode {
        case .on: .enforced
        case .off: .ignored
        case .auto: trusted ? .enforced : .unknown
        }
        knowledge = Mutex(start)
    }

    /// Send `If-None-Match: *` first, and skip the HEAD.
    public var enforced: Bool { knowledge.withLock { $0 == .enforced } }

    /// An overwrite should go out with the header once, to find out.
    public var shouldProbe: Bool { knowledge.withLock { $0 == .unknown } }

    /// What an overwrite sent with the header showed: a 412 (`enforced`), or a success.
    /// Returns true when this changed what is known (to log it once).
    @discardableResult
    public func learned(enforced: Bool) -> Bool {
        knowledge.withLock { state in
            guard state == .unknown else { return false }
            state = enforced ? .enforced : .ignored
            return true
        }
    }

    /// For stores that say nothing: never used.
    public static let unsupported = ConditionalWrites(.off)
}
