import Foundation

/// One item's current state, as a record table's compacted topic keeps it
/// (Kafka key = `TableDefinition.itemKey`). A deleted item is a tombstone (a
/// null value) carrying its version in the `ferry-item-version` header, so
/// compaction forgets it after `delete.retention.ms`.
public struct ItemRecord: Sendable, Hashable, Codable {
    public var table: String
    /// The key attribute names, partition key first.
    public var keySchema: [String]
    public var keys: AttributeMap
    public var item: AttributeMap
    /// 1 for the first write of the item, one more for each later write (a
    /// re-created item continues from its tombstone's version).
    public var version: Int64
    /// The item's owner (the identity that created it), when it was written by an authenticated caller.
    public var owner: String?
    /// The request that wrote this version.
    public var requestId: String
    public var updatedAt: String

    public init(table: String, keySchema: [String], keys: AttributeMap, item: AttributeMap, version: Int64,
                owner: String?, requestId: String, updatedAt: String) {
        self.table = table; self.keySchema = keySchema; self.keys = keys; self.item = item; self.version = version
        self.owner = owner; self.requestId = requestId; self.updatedAt = updatedAt
    }

    public var itemKey: String { ItemKey.text(keySchema.compactMap { keys[$0] }) }

    /// Versions a record may carry: the next one (`version + 1`) always exists.
    public static let versions: ClosedRange<Int64> = 1...(Int64.max - 1)

    public static let versionHeader = "ferry-item-version"
    public static let requestHeader = "ferry-request-id"
}
