import Foundation

public enum ItemOperation: String, Sendable, Codable, CaseIterable {
    case putItem, updateItem, deleteItem
}

/// A write to a record table, on `<prefix>.requests` beside transfers (same
/// envelope: `id`, `accessLevel`, `identityId`, `auth`, `callback`). Files the
/// item carries as `S3ObjectInput`s are uploaded first; the item is written
/// with the resulting `S3Object`s (docs/producers/records.md).
public struct ItemRequest: Sendable, Hashable {
    public var id: String
    public var op: ItemOperation
    public var table: String
    /// putItem: the whole item, key attributes included. updateItem: the attributes to set.
    public var item: AttributeMap
    /// updateItem and deleteItem: the key attributes.
    public var key: AttributeMap
    /// updateItem: attributes to remove.
    public var remove: [String]
    public var accessLevel: AccessLevel?
    public var identityId: String?
    public var auth: String?
    public var callback: String?
    /// The file inputs found in `item`, in a stable order (by path).
    public var files: [FileInput]

    public var effectiveAccessLevel: AccessLevel { accessLevel ?? .guest }

    /// The Kafka key producers use, so one item's requests share a partition and run in order.
    public static func kafkaKey(table: String, itemKey: String) -> String { "tables/\(table)/\(itemKey)" }

    public init(id: String, op: ItemOperation, table: String, item: AttributeMap = [:], key: AttributeMap = [:], remove: [String] = [],
                accessLevel: AccessLevel? = nil, identityId: String? = nil, auth: String? = nil, callback: String? = nil) throws(FerryError) {
        self.id = id; self.op = op; self.table = table; self.item = item; self.key = key; self.remove = remove
        self.accessLevel = accessLevel; self.identityId = identityId; self.auth = auth; self.callback = callback
        files = op == .deleteItem ? [] : try FileInput.find(in: item)
    }
}

/// An attribute shaped like AppSync's `S3ObjectInput`: `bucket`, `key`,
/// `region`, `mimeType` and where the bytes are, `localUri` (a path or
/// `file://` URI under the data root) or `source` (anything an upload takes).
/// `key` is a user key, under the request's access level like an upload's.
public struct FileInput: Sendable, Hashable {
    /// Where it sits in the item: attribute names and list indexes.
    public var path: [PathElement]
    public var bucket: String
    public var key: String
    public var region: String?
    public var mimeType: String?
    public var source: String

    public enum PathElement: Sendable, Hashable, CustomStringConvertible {
        case attribute(String), index(Int)
        public var description: String {
            switch self {
            case .attribute(let name): return name
            case .index(let i): return "[\(i)]"
            }
        }
    }

    public var pathText: String {
        path.enumerated().map { i, element in
            if case .attribute = element, i > 0 { return "." + element.description }
            return element.description
        }.joined()
    }

    static let fields: Set<String> = ["bucket", "key", "region", "localUri", "source", "mimeType"]

    /// A map is a file input when it names `bucket`, `key` and `localUri` or
    /// `source`, and nothing outside `S3ObjectInput`'s fields.
    static func find(in item: AttributeMap) throws(FerryError) -> [FileInput] {
        var found: [FileInput] = []
        func walk(_ value: AttributeValue, _ path: [PathElement]) throws(FerryError) {
            switch value {
            case .map(let map):
                if map["bucket"] != nil, map["key"] != nil, map["localUri"] != nil || map["source"] != nil,
                   Set(map.keys).isSubset(of: fields) {
                    found.append(try FileInput(map, path: path))
                    return
                }
                for name in map.keys.sorted() { try walk(map[name]!, path + [.attribute(name)]) }
            case .list(let list):
                for (i, element) in list.enumerated() { try walk(element, path + [.index(i)]) }
            default:
                return
            }
        }
        for name in item.keys.sorted() { try walk(item[name]!, [.attribute(name)]) }
        guard found.count <= maxFiles else {
            throw FerryError(.invalidRequest, "an item may carry at most \(maxFiles) files; this one has \(found.count)")
        }
        return found
    }

    /// Files per item: each is a transfer of its own, run before the item is written.
    public static let maxFiles = 16

    init(_ map: AttributeMap, path: [PathElement]) throws(FerryError) {
        let at = path.map(\.description).joined(separator: ".")
        func text(_ name: String) throws(FerryError) -> String? {
            guard let value = map[name] else { return nil }
            guard case .string(let s) = value else { throw FerryError(.invalidRequest, "'\(at).\(name)' must be a string") }
            return s
        }
        self.path = path
        bucket = try text("bucket") ?? ""
        key = try text("key") ?? ""
        region = try text("region")
        mimeType = try text("mimeType")
        if let problem = RequestLimits.bucketNameProblem(bucket) { throw FerryError(problem.code, "'\(at)': \(problem.message)") }
        if let problem = ObjectKeyRule.violation(of: key, field: "\(at).key") { throw problem }
        if let type = mimeType, let problem = HeaderValueRule.violation(of: type, field: "\(at).mimeType") { throw problem }
        if let region, let problem = HeaderValueRule.violation(of: region, field: "\(at).region") { throw problem }
        if let local = try text("localUri") {
            guard try text("source") == nil else { throw FerryError(.invalidRequest, "'\(at)' names both localUri and source") }
            if local.hasPrefix("file://") {
                source = local
            } else if local.hasPrefix("/") {
                source = URL(fileURLWithPath: local).absoluteString
            } else {
                throw FerryError(.invalidRequest, "'\(at).localUri' must be an absolute path or a file:// URI")
            }
        } else {
            source = try text("source") ?? ""
        }
        if let problem = RequestDecoder.sourceProblem(source) { throw FerryError(problem.code, "'\(at)': \(problem.message)") }
    }
}

extension AttributeMap {
    /// The value at a file input's path.
    public func value(at path: [FileInput.PathElement]) -> AttributeValue? {
        guard let first = path.first, case .attribute(let name) = first, var value = self[name] else { return nil }
        for element in path.dropFirst() {
            switch (element, value) {
            case (.attribute(let n), .map(let m)): guard let next = m[n] else { return nil }; value = next
            case (.index(let i), .list(let l)): guard l.indices.contains(i) else { return nil }; value = l[i]
            default: return nil
            }
        }
        return value
    }

    /// Replaces the value at `path` (which must exist).
    public mutating func set(_ newValue: AttributeValue, at path: [FileInput.PathElement]) {
        func replaced(_ value: AttributeValue, _ rest: ArraySlice<FileInput.PathElement>) -> AttributeValue {
            guard let head = rest.first else { return newValue }
            switch (head, value) {
            case (.attribute(let n), .map(var m)):
                if let inner = m[n] { m[n] = replaced(inner, rest.dropFirst()) }
                return .map(m)
            case (.index(let i), .list(var l)):
                if l.indices.contains(i) { l[i] = replaced(l[i], rest.dropFirst()) }
                return .list(l)
            default:
                return value
            }
        }
        guard let first = path.first, case .attribute(let name) = first, let value = self[name] else { return }
        self[name] = replaced(value, path.dropFirst())
    }

    /// Every `S3Object` the item references (maps with `bucket` and `key` written by Ferry), for deleting unreferenced files.
    public var referencedObjects: Set<ObjectReference> {
        var found: Set<ObjectReference> = []
        func walk(_ value: AttributeValue) {
            switch value {
            case .map(let m):
                if case .string(let bucket)? = m["bucket"], case .string(let key)? = m["key"],
                   case .string(let transferId)? = m[S3ObjectImage.marker] {
                    found.insert(ObjectReference(bucket: bucket, key: key, transferId: transferId))
                }
                m.values.forEach(walk)
            case .list(let l): l.forEach(walk)
            default: break
            }
        }
        values.forEach(walk)
        return found
    }
}

/// A stored object an item points at: bucket, full S3 key, and the transfer
/// that wrote it (a key written again since is another reference, so a
/// release never deletes a newer writer's object).
public struct ObjectReference: Sendable, Hashable, Codable, Comparable {
    public var bucket: String
    public var key: String
    public var transferId: String
    public init(bucket: String, key: String, transferId: String) { self.bucket = bucket; self.key = key; self.transferId = transferId }
    public static func < (a: Self, b: Self) -> Bool { (a.bucket, a.key, a.transferId) < (b.bucket, b.key, b.transferId) }
}

/// The `S3Object` Ferry writes in place of an `S3ObjectInput`: AppSync's
/// `bucket`, `key` (the full S3 key), `region`, `version`, plus `size`, `eTag`,
/// `mimeType` and `ferryFile` (the transfer id that uploaded it), which marks
/// the map as a file Ferry manages.
public enum S3ObjectImage {
    public static let marker = "ferryFile"

    public static func make(bucket: String, key: String, region: String, version: String?, size: Int64?, eTag: String?,
                            mimeType: String?, transferId: String) -> AttributeValue {
        var map: AttributeMap = ["bucket": .string(bucket), "key": .string(key), "region": .string(region),
                                 marker: .string(transferId)]
        map["version"] = version.map { .string($0) }
        map["size"] = size.map { .number($0) }
        map["eTag"] = eTag.map { .string($0) }
        map["mimeType"] = mimeType.map { .string($0) }
        return .map(map)
    }
}
