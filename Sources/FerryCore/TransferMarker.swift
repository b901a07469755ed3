/// User-metadata keys (`x-amz-meta-…`) a worker writes on every object it
/// uploads. They make a redelivered request recognisable: an object that
/// already carries its transfer id is not uploaded again, and the event
/// re-emitted for it keeps the sequencer of the first write.
public enum TransferMarker {
    public static let transferId = "ferry-transfer-id"
    public static let sequencer = "ferry-sequencer"
    /// Who wrote the object and at which access level: the `owner` and
    /// `accessLevel` of the `objects` stream's old image when it is overwritten.
    public static let owner = "ferry-owner"
    public static let accessLevel = "ferry-access-level"

    /// Whether a metadata key is one of these (they are not the user's metadata).
    public static func isMarker(_ key: String) -> Bool { key.hasPrefix("ferry-") }
}
