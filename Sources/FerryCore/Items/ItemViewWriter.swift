/// One item version read from a table topic or written by a worker: a
/// record, or a deletion (tombstone) at `version`.
public struct ItemVersion: Sendable, Hashable {
    public var table: String
    public var itemKey: String
    public var version: Int64
    /// nil: the item was deleted.
    public var record: ItemRecord?

    public init(table: String, itemKey: String, version: Int64, record: ItemRecord?) {
        self.table = table; self.itemKey = itemKey; self.version = version; self.record = record
    }
}

/// Where a `TableFollower` puts what it reads: a worker's state database, a
/// reader's SQLite view, or memory. Applying keeps the highest version per item.
public protocol ItemViewWriter: Sendable {
    /// Applies the changes read from `topic`/`partition` and records that reading resumes at `next`.
    func apply(_ changes: [ItemVersion], topic: String, partition: Int32, next: Int64) async throws
    /// Where reading `topic`/`partition` resumes; nil: from its beginning.
    func position(topic: String, partition: Int32) async throws -> Int64?
}
