/// The set of registered triggers. Built once at start-up by the registration
/// file in `triggers/`; read-only afterwards.
public struct TriggerRegistry: Sendable {
    public private(set) var s3Triggers: [S3TriggerRegistration] = []

    public init() {}

    /// Adds a trigger; names must be unique.
    public mutating func register(_ registration: S3TriggerRegistration) throws(TriggerRegistrationError) {
        guard !registration.name.isEmpty else { throw TriggerRegistrationError("a trigger needs a name") }
        guard !s3Triggers.contains(where: { $0.name == registration.name }) else {
            throw TriggerRegistrationError("two triggers are named '\(registration.name)'")
        }
        guard !registration.events.isEmpty else {
            throw TriggerRegistrationError("trigger '\(registration.name)' names no event types")
        }
        // S3 refuses two notification configurations that could both fire for one
        // event: same event type, overlapping prefixes and overlapping suffixes.
        if let clash = s3Triggers.first(where: { Self.overlap($0, registration) }) {
            throw TriggerRegistrationError("triggers '\(clash.name)' and '\(registration.name)' overlap: an event type in common "
                + "and prefixes and suffixes that can both match one key (S3 rejects such configurations)")
        }
        s3Triggers.append(registration)
    }

    static func overlap(_ a: S3TriggerRegistration, _ b: S3TriggerRegistration) -> Bool {
        let sharesEventType = a.events.contains { x in b.events.contains { y in x.overlaps(y) } }
        let prefixes = a.prefix.hasPrefix(b.prefix) || b.prefix.hasPrefix(a.prefix)
        let suffixes = a.suffix.hasSuffix(b.suffix) || b.suffix.hasSuffix(a.suffix)
        return sharesEventType && prefixes && suffixes
    }

    /// The triggers `record` reaches.
    public func s3Triggers(for record: S3Event.Record) -> [S3TriggerRegistration] {
        s3Triggers.filter { $0.matches(record) }
    }
}

/// A registration that cannot work; Ferry refuses to start with it.
public struct TriggerRegistrationError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
