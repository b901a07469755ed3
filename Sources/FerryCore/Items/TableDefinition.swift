import Foundation

/// A record table declared on the workers (`--table`): its key attributes and
/// what replacing or deleting an item does to the files it referenced.
/// Its durable store is the compacted topic `<prefix>.tables.<name>`.
public struct TableDefinition: Sendable, Hashable, Codable {
    public var name: String
    public var partitionKey: String
    public var sortKey: String?
    /// Files an item no longer references after a replace, an update or a
    /// delete are deleted from the store (off by default: another item or
    /// another program may still read them).
    public var deletesUnreferencedFiles: Bool

    public init(name: String, partitionKey: String, sortKey: String? = nil, deletesUnreferencedFiles: Bool = false) {
        self.name = name; self.partitionKey = partitionKey; self.sortKey = sortKey
        self.deletesUnreferencedFiles = deletesUnreferencedFiles
    }

    /// The two tables Ferry keeps itself; no declared table may take their names.
    public static let reserved: Set<String> = ["objects", "transfers"]

    /// `NAME:PARTITION_KEY[/SORT_KEY][:delete-files]`, e.g. `posts:id`,
    /// `comments:postId/createdAt:delete-files`.
    public init(parsing text: String) throws(FerryError) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 || parts.count == 3 else {
            throw FerryError(.invalidRequest, "a table is NAME:PARTITION_KEY[/SORT_KEY][:delete-files]; got '\(text)'")
        }
        let keys = parts[1].split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard (1...2).contains(keys.count), keys.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 255 }) else {
            throw FerryError(.invalidRequest, "table '\(parts[0])': key attributes are PARTITION_KEY or PARTITION_KEY/SORT_KEY")
        }
        var deletes = false
        if parts.count == 3 {
            guard parts[2] == "delete-files" else {
                throw FerryError(.invalidRequest, "table '\(parts[0])': the only option is delete-files; got '\(parts[2])'")
            }
            deletes = true
        }
        if let problem = Self.nameProblem(parts[0]) { throw problem }
        self.init(name: parts[0], partitionKey: keys[0], sortKey: keys.count == 2 ? keys[1] : nil, deletesUnreferencedFiles: deletes)
    }

    /// Several declarations (each may hold comma-separated ones, as the environment gives them); a name may appear once.
    public static func parseAll(_ texts: [String]) throws(FerryError) -> [TableDefinition] {
        var tables: [TableDefinition] = []
        for text in texts.flatMap({ $0.split(separator: ",").map(String.init) }) {
            let table = try TableDefinition(parsing: text.trimmingCharacters(in: .whitespaces))
            guard !tables.contains(where: { $0.name == table.name }) else { throw FerryError(.invalidRequest, "table \(table.name) is declared twice") }
            tables.append(table)
        }
        return tables
    }

    /// DynamoDB's table name rule, which also makes a valid Kafka topic name:
    /// 3–255 of `A-Za-z0-9_.-`.
    public static func nameProblem(_ name: String) -> FerryError? {
        let ok = (3...200).contains(name.utf8.count) && name.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x5F || c == 0x2E || c == 0x2D
        }
        guard ok else { return FerryError(.invalidRequest, "table name '\(name.prefix(80))' must be 3–200 of A-Za-z0-9_.-") }
        if reserved.contains(name) { return FerryError(.invalidRequest, "table name '\(name)' is Ferry's own") }
        return nil
    }

    public var keyAttributes: [String] { [partitionKey] + (sortKey.map { [$0] } ?? []) }

    /// The item's key attributes; `InvalidRequest` when one is missing or not a string, number or binary.
    public func keys(of item: AttributeMap) throws(FerryError) -> AttributeMap {
        var keys: AttributeMap = [:]
        for name in keyAttributes {
            guard let value = item[name] else {
                throw FerryError(.invalidRequest, "table \(self.name): the item has no key attribute '\(name)'")
            }
            switch value {
            case .string(let s) where !s.isEmpty && s.utf8.count <= 1024: keys[name] = value
            case .number, .binary: keys[name] = value
            default:
                throw FerryError(.invalidRequest, "table \(self.name): key attribute '\(name)' must be a non-empty string of ≤ 1024 bytes, a number or binary")
            }
        }
        return keys
    }

    /// The key as one unambiguous text (the JSON of the key values in key
    /// order): the Kafka key on the table's topic and the view's primary key.
    public func itemKey(_ keys: AttributeMap) -> String {
        ItemKey.text(keyAttributes.compactMap { keys[$0] })
    }
}

public enum ItemKey {
    /// `[{"S":"p1"},{"N":"3"}]`: each value has one JSON form, so equal keys give equal text.
    public static func text(_ values: [AttributeValue]) -> String {
        values.map(\.description).joined(separator: ",").wrapped
    }
}

private extension String {
    var wrapped: String { "[" + self + "]" }
}

extension Topics {
    /// The compacted topic that stores a record table (key = item key, latest value wins; a tombstone deletes).
    public func table(_ name: String) -> String { "\(prefix).tables.\(name)" }
    public var tablesPrefix: String { "\(prefix).tables." }
}
