import FerryCore
/// An S3 event type as a notification configuration names it:
/// `ObjectCreated:*`, `ObjectCreated:Put`, `ObjectRemoved:Delete`, `*`.
/// A leading `s3:` is accepted and ignored, as AWS writes it in configurations.
public struct EventTypePattern: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let pattern: String

    public init(_ pattern: String) {
        self.pattern = pattern.hasPrefix("s3:") ? String(pattern.dropFirst(3)) : pattern
    }

    public init(stringLiteral value: String) { self.init(value) }

    public var description: String { pattern }

    /// The event types Ferry announces: its own writes' and S3's, and the
    /// ones MinIO adds that ingest passes on (retention, legal hold and
    /// tagging changes, versions removed together).
    public static let announced = ["ObjectCreated:Put", "ObjectCreated:Post", "ObjectCreated:Copy", "ObjectCreated:CompleteMultipartUpload",
                                   "ObjectRemoved:Delete", "ObjectRemoved:DeleteMarkerCreated",
                                   "ObjectCreated:PutRetention", "ObjectCreated:PutLegalHold", "ObjectCreated:PutTagging",
                                   "ObjectCreated:DeleteTagging", "ObjectRemoved:DeleteAllVersions", "ObjectRemoved:NoOP"]
    public static let wildcards = ["*", "ObjectCreated:*", "ObjectRemoved:*"]

    /// Whether some event Ferry announces can match: a pattern that none can
    /// (a typo such as `ObjectCreated:Pt`, or `ObjectRestore:*`, which S3 has
    /// but Ferry never announces) would leave its trigger silent for ever.
    public var isAnnounced: Bool { Self.wildcards.contains(pattern) || Self.announced.contains(pattern) }

    /// Whether an event named `eventName` (with or without `s3:`) is of this type.
    public func matches(_ eventName: String) -> Bool {
        let name = eventName.hasPrefix("s3:") ? Substring(eventName.dropFirst(3)) : Substring(eventName)
        if pattern == "*" { return true }
        if pattern.hasSuffix(":*") {
            return name.hasPrefix(pattern.dropLast())  // keeps the colon: "ObjectCreated:"
        }
        return name == pattern
    }

    /// Whether some event name matches both patterns.
    public func overlaps(_ other: EventTypePattern) -> Bool {
        if pattern == "*" || other.pattern == "*" { return true }
        func family(_ p: String) -> Substring { p.split(separator: ":").first ?? "" }
        switch (pattern.hasSuffix(":*"), other.pattern.hasSuffix(":*")) {
        case (true, true): return family(pattern) == family(other.pattern)
        case (true, false): return matches(other.pattern)
        case (false, true): return other.matches(pattern)
        case (false, false): return pattern == other.pattern
        }
    }
}
