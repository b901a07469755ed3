/// A query of a record table: one partition key, optionally a sort-key prefix
/// or an inclusive sort-key range (numbers compare as numbers), in sort-key order.
public struct ItemQuery: Sendable, Hashable {
    public var table: String
    public var partitionKey: String
    public var sortKeyPrefix: String?
    public var from: String?
    public var to: String?
    public var limit: Int

    public init(table: String, partitionKey: String, sortKeyPrefix: String? = nil, from: String? = nil, to: String? = nil, limit: Int = 1000) {
        self.table = table; self.partitionKey = partitionKey; self.sortKeyPrefix = sortKeyPrefix
        self.from = from; self.to = to; self.limit = max(0, limit)
    }

    /// Whether `record` answers the query (the SQLite view applies the same rule in SQL).
    public func matches(_ record: ItemRecord) -> Bool {
        guard record.table == table, let key = record.keys[record.keySchema.first ?? ""]?.stringValue,
              key == partitionKey || key == Self.canonicalNumber(partitionKey) else { return false }
        let sort = record.keySchema.count > 1 ? record.keys[record.keySchema[1]] : nil
        let text = sort?.stringValue
        if let prefix = sortKeyPrefix, !(text?.hasBytePrefix(prefix) ?? false) { return false }
        if let from, Self.compare(sort, from) == .orderedAscending { return false }
        if let to, Self.compare(sort, to) == .orderedDescending { return false }
        return true
    }

    /// The canonical text of a key typed as a number (`3.0` → `3`), or nil.
    public static func canonicalNumber(_ text: String) -> String? {
        try? DynamoNumber.canonical(Array(text.utf8), field: "key")
    }

    /// Orders records by sort key: numbers by value (exactly), others by their
    /// UTF-8 bytes, as DynamoDB orders strings (and SQLite's view does).
    public static func sortKeyOrder(_ a: ItemRecord, _ b: ItemRecord) -> Bool {
        let x = a.keySchema.count > 1 ? a.keys[a.keySchema[1]] : nil
        let y = b.keySchema.count > 1 ? b.keys[b.keySchema[1]] : nil
        if case .number(let m)? = x, case .number(let n)? = y, let om = DynamoNumber.orderKey(m), let on = DynamoNumber.orderKey(n) {
            return om.utf8.lexicographicallyPrecedes(on.utf8)
        }
        return (x?.stringValue ?? "").utf8.lexicographicallyPrecedes((y?.stringValue ?? "").utf8)
    }

    private enum Order { case orderedAscending, orderedSame, orderedDescending }

    private static func compare(_ value: AttributeValue?, _ bound: String) -> Order {
        guard let value else { return .orderedAscending }
        if case .number(let n) = value, let a = DynamoNumber.orderKey(n), let b = DynamoNumber.orderKey(bound) {
            return a.utf8.lexicographicallyPrecedes(b.utf8) ? .orderedAscending : (a == b ? .orderedSame : .orderedDescending)
        }
        let text = value.stringValue ?? ""
        if text.utf8.elementsEqual(bound.utf8) { return .orderedSame }
        return text.utf8.lexicographicallyPrecedes(bound.utf8) ? .orderedAscending : .orderedDescending
    }
}
