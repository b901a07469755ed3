import FerryCore
/// The set of registered triggers. Built once at start-up by the registration
/// file in `triggers/` (and the targets declared in configuration); read-only afterwards.
public struct TriggerRegistry: Sendable {
    public private(set) var s3Triggers: [S3TriggerRegistration] = []
    public private(set) var streamTriggers: [StreamTriggerRegistration] = []
    /// Registrations that stepped aside (`yieldsToOverlaps`), with the reason; shown by `ferry triggers list`.
    public private(set) var yielded: [(name: String, reason: String)] = []

    public init() {}

    /// Every trigger's name, S3 triggers first.
    public var names: [String] { s3Triggers.map(\.name) + streamTriggers.map(\.name) }

    private func checkName(_ name: String) throws(TriggerRegistrationError) {
        guard !name.isEmpty else { throw TriggerRegistrationError("a trigger needs a name") }
        guard name.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }) else {
            throw TriggerRegistrationError("trigger name '\(name)' may use letters, digits, '-', '_' and '.' only (it names a consumer group)")
        }
        guard !names.contains(name) else { throw TriggerRegistrationError("two triggers are named '\(name)'") }
    }

    /// Adds an S3 trigger; names must be unique.
    public mutating func register(_ registration: S3TriggerRegistration) throws(TriggerRegistrationError) {
        try checkName(registration.name)
        guard !registration.events.isEmpty else {
            throw TriggerRegistrationError("trigger '\(registration.name)' names no event types")
        }
        if let silent = registration.events.first(where: { !$0.isAnnounced }) {
            throw TriggerRegistrationError("trigger '\(registration.name)': no event of type '\(silent)' is ever announced; the types are "
                + (EventTypePattern.wildcards + EventTypePattern.announced).joined(separator: ", ") + " (with or without 's3:')")
        }
        // S3 refuses two notification configurations that could both fire for one
        // event: same event type, overlapping prefixes and overlapping suffixes.
        if let clash = s3Triggers.first(where: { Self.overlap($0, registration) }) {
            if registration.yieldsToOverlaps {
                yielded.append((registration.name, "overlaps '\(clash.name)', which takes its events"))
                return
            }
            throw TriggerRegistrationError("triggers '\(clash.name)' and '\(registration.name)' overlap: an event type in common "
                + "and prefixes and suffixes that can both match one key (S3 rejects such configurations)")
        }
        s3Triggers.append(registration)
    }

    /// Adds a stream trigger (an event source mapping); names must be unique.
    public mutating func register(_ registration: StreamTriggerRegistration) throws(TriggerRegistrationError) {
        try checkName(registration.name)
        // Ferry's own tables, or a record table (declared on the workers with --table).
        guard StreamTriggerRegistration.tables.contains(registration.table) || TableDefinition.nameProblem(registration.table) == nil else {
            throw TriggerRegistrationError("trigger '\(registration.name)': no stream for table '\(registration.table)' "
                + "(Ferry's tables: \(StreamTriggerRegistration.tables.joined(separator: ", ")); record tables are 3–200 of A-Za-z0-9_.-)")
        }
        streamTriggers.append(registration)
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
