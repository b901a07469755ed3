import FerryCore
import FerryKafka
import FerryTables
import Foundation
import Logging
import Synchronization

/// Record tables for Swift producers: `putItem`, `updateItem`, `deleteItem`
/// (enqueued on `<prefix>.requests` like transfers, keyed so one item's writes
/// run in order; their outcome is a status like a transfer's), and reading
/// items by key or by query from a view this client builds from the tables'
/// compacted topics (read once, then followed).
public final class ItemClient: Sendable {
    private let transfers: TransferClient
    private let kafka: KafkaConfiguration
    private let topics: Topics
    private let logger: Logger
    private let view = InMemoryItemView()
    /// Writes sent and not yet awaited: their table and item, so `result` can wait for them to be readable.
    private let sent = Mutex<[String: (table: String, itemKey: String, op: ItemOperation)]>([:])
    private let following = Mutex<[String: (follower: TableFollower, task: Task<Void, Never>)]>([:])

    /// `deliveryTimeout` as `TransferClient`'s.
    public init(bootstrapServers: String, properties: [String: String] = [:], topics: Topics = Topics(),
                deliveryTimeout: Duration? = nil, logger: Logger) throws(KafkaError) {
        transfers = try TransferClient(bootstrapServers: bootstrapServers, properties: properties, topics: topics,
                                       deliveryTimeout: deliveryTimeout, logger: logger)
        kafka = KafkaConfiguration(bootstrapServers: bootstrapServers, properties)
        self.topics = topics
        self.logger = logger
    }

    deinit {
        following.withLock { for (_, entry) in $0 { entry.task.cancel() } }
    }

    // MARK: writes

    /// Writes a whole item of `table`; every `S3ObjectInput`-shaped attribute
    /// (`bucket`, `key`, `localUri` or `source`, `region`, `mimeType`) is uploaded first.
    @discardableResult
    public func putItem(_ item: AttributeMap, into table: TableDefinition, id: String = UUID().uuidString,
                        accessLevel: AccessLevel? = nil, identityId: String? = nil, auth: String? = nil) async throws -> String {
        try await send(["op": "putItem", "table": table.name], attributes: ["item": item], table: table, id: id,
                       accessLevel: accessLevel, identityId: identityId, auth: auth)
        return id
    }

    /// Sets `set` and removes `remove` on the item with `key` (created when missing, as DynamoDB's UpdateItem does).
    @discardableResult
    public func updateItem(key: AttributeMap, in table: TableDefinition, set: AttributeMap = [:], remove: [String] = [],
                           id: String = UUID().uuidString, accessLevel: AccessLevel? = nil, identityId: String? = nil,
                           auth: String? = nil) async throws -> String {
        try await send(["op": "updateItem", "table": table.name, "remove": remove], attributes: ["key": key, "item": set],
                       table: table, id: id, accessLevel: accessLevel, identityId: identityId, auth: auth)
        return id
    }

    /// Deletes the item with `key` (and, for tables declared `delete-files`, the files it referenced).
    @discardableResult
    public func deleteItem(key: AttributeMap, from table: TableDefinition, id: String = UUID().uuidString,
                           accessLevel: AccessLevel? = nil, identityId: String? = nil, auth: String? = nil) async throws -> String {
        try await send(["op": "deleteItem", "table": table.name], attributes: ["key": key], table: table, id: id,
                       accessLevel: accessLevel, identityId: identityId, auth: auth)
        return id
    }

    /// The terminal status of an item request (`completed`, `failed` or
    /// `rejected`). For a write this client sent, `completed` is returned once
    /// this client's reads see the write too: the status and the table record
    /// are published together, but on different partitions, so either may
    /// arrive first.
    public func result(of id: String, timeout: Double = 600) async throws -> TransferStatus {
        let status = try await transfers.result(of: id, timeout: timeout)
        guard status.state == .completed, let sent = sent.withLock({ $0.removeValue(forKey: id) }) else { return status }
        let follower = try follower(for: sent.table)
        let deadline = Date().addingTimeInterval(min(timeout, 30))
        while Date() < deadline {
            try await follower.caughtUp(table: sent.table, timeout: 30)
            let held = view.item(table: sent.table, itemKey: sent.itemKey)
            if sent.op == .deleteItem ? held == nil : held?.requestId == id { return status }
            try await Task.sleep(for: .milliseconds(20))
        }
        return status
    }

    /// `attributes` (item, key) are written as `ItemJSONText` writes them, numbers exactly.
    private func send(_ fields: [String: Any], attributes: KeyValuePairs<String, AttributeMap>, table: TableDefinition, id: String,
                      accessLevel: AccessLevel?, identityId: String?, auth: String?) async throws {
        var json = fields
        json["id"] = id
        json["accessLevel"] = accessLevel?.rawValue
        json["identityId"] = identityId
        json["auth"] = auth
        var bytes = Array(try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys, .withoutEscapingSlashes]))
        bytes.removeLast()  // the closing brace: the attributes follow
        for (name, map) in attributes {
            do {
                bytes += Array(",\"\(name)\":\(try ItemJSONText.text(map, field: name))".utf8)
            } catch {
                throw TransferClientError.invalidRequest(error)
            }
        }
        bytes.append(UInt8(ascii: "}"))
        // The rules a worker applies, checked before anything is sent; the item's
        // key as the worker reads it (numbers in their canonical form).
        let decoded = RequestDecoder.decodeAny(bytes)
        if case .failure(let failure) = decoded { throw TransferClientError.invalidRequest(failure.error) }
        guard case .success(.item(let request)) = decoded else { throw TransferClientError.invalidRequest(FerryError(.internalError, "not an item request")) }
        let itemKey = table.itemKey(try table.keys(of: request.op == .putItem ? request.item : request.key))
        try await transfers.producerSend(topic: topics.requests, key: ItemRequest.kafkaKey(table: table.name, itemKey: itemKey), value: bytes)
        if let op = (fields["op"] as? String).flatMap(ItemOperation.init) {
            sent.withLock { $0[id] = (table.name, itemKey, op) }
        }
    }

    // MARK: reads

    /// `table`'s keys as its items carry them (`keySchema`, read from the table's
    /// topic), for writing to a table by its name alone; nil while it holds no item.
    public func definition(of table: String, timeout: Double = 30) async throws -> TableDefinition? {
        try await follower(for: table).caughtUp(table: table, timeout: timeout)
        guard let schema = view.keySchema(table: table), let partitionKey = schema.first else { return nil }
        return TableDefinition(name: table, partitionKey: partitionKey, sortKey: schema.count > 1 ? schema[1] : nil)
    }

    /// The item of `table` whose partition key (and sort key, for tables with one) reads as given.
    public func get(table: String, partitionKey: String, sortKey: String? = nil, timeout: Double = 30) async throws -> ItemRecord? {
        let found = try await query(ItemQuery(table: table, partitionKey: partitionKey, from: sortKey, to: sortKey, limit: 2), timeout: timeout)
        return found.first { sortKey != nil || $0.keySchema.count == 1 }
    }

    /// Items of one partition key in sort-key order, as of the table topic's end when called.
    public func query(_ query: ItemQuery, timeout: Double = 30) async throws -> [ItemRecord] {
        try await follower(for: query.table).caughtUp(table: query.table, timeout: timeout)
        return view.query(query)
    }

    /// Downloads the file an item's attribute references (an `S3Object`, at
    /// `path`: a name, or names and list indexes) to `destination` under the
    /// workers' data root, as a download request through the workers, so the
    /// access rules apply: the level and owner come from the stored key's layout.
    /// A `destination` ending in `/` receives the file under its key's last segment.
    public func download(table: String, partitionKey: String, sortKey: String? = nil, attribute path: [FileInput.PathElement],
                         to destination: String, identityId: String? = nil, auth: String? = nil,
                         resolver: any PrefixResolver = DefaultPrefixResolver(), timeout: Double = 3600) async throws -> TransferStatus {
        guard let record = try await get(table: table, partitionKey: partitionKey, sortKey: sortKey) else {
            throw TransferClientError.invalidRequest(FerryError(.noSuchKey, "no item \(partitionKey) in table \(table)"))
        }
        guard case .map(let object)? = record.item.value(at: path),
              case .string(let bucket)? = object["bucket"], case .string(let key)? = object["key"] else {
            throw TransferClientError.invalidRequest(FerryError(.invalidRequest, "attribute \(path.map(\.description).joined(separator: ".")) of item \(partitionKey) holds no S3Object"))
        }
        guard let area = resolver.area(of: key) else {
            throw TransferClientError.invalidRequest(FerryError(.accessDenied, "\(key) lies in no access level's area"))
        }
        let prefix = try resolver.prefix(for: area.level, owner: area.owner)
        // A destination ending in `/` is a folder (workers refuse it as a file): the file keeps its key's name there.
        let file = destination.hasSuffix("/") ? destination + (key.split(separator: "/").last.map(String.init) ?? "") : destination
        let request = TransferRequest(id: UUID().uuidString.lowercased(), op: .download, bucket: bucket, key: String(key.dropFirst(prefix.count)),
                                      accessLevel: area.level, identityId: identityId ?? area.owner,
                                      targetIdentityId: area.level == .protected ? area.owner : nil, destination: file, auth: auth)
        return try await transfers.run(request, timeout: timeout)
    }

    private func follower(for table: String) throws -> TableFollower {
        try following.withLock { entries in
            if let entry = entries[table] { return entry.follower }
            let follower = try TableFollower(tables: [table], topics: topics, kafka: kafka, view: view, logger: logger)
            entries[table] = (follower, Task { await follower.run() })
            return follower
        }
    }
}
