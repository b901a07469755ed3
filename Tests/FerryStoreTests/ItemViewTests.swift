import FerryCore
import FerryStore
import FerryTestSupport
import Foundation
import Testing

/// The item view keeps the highest version of each item, whatever order the
/// versions arrive in (a worker's own write first, the same write read back
/// from the topic later, an older write late), and a deletion is a version too.
@Suite struct ItemViewTests {
    func record(_ id: String, version: Int64, title: String) -> ItemRecord {
        ItemRecord(table: "posts", keySchema: ["id"], keys: ["id": .string(id)], item: ["id": .string(id), "title": .string(title)],
                   version: version, owner: nil, requestId: "r\(version)", updatedAt: "")
    }

    @Test func theHighestVersionWinsInAnyOrder() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-items-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let key = #"[{"S":"p1"}]"#
        var versions = (1...6).map { ItemVersion(table: "posts", itemKey: key, version: $0, record: record("p1", version: $0, title: "v\($0)")) }
        versions.append(ItemVersion(table: "posts", itemKey: key, version: 7, record: nil))
        for seed in 0..<20 {
            var rng = SeededGenerator(seed: UInt64(seed))
            let store = try WorkerStateStore(directory: dir.appendingPathComponent("\(seed)"))
            for (offset, change) in versions.shuffled(using: &rng).enumerated() {
                try await store.apply([change], topic: "ferry.tables.posts", partition: 0, next: Int64(offset + 1))
            }
            let held = try await store.currentItem(table: "posts", itemKey: key)
            #expect(held?.version == 7 && held?.record == nil, "seed \(seed)")
            #expect(try await store.position(topic: "ferry.tables.posts", partition: 0) == 7)
        }
        // Without the deletion, the latest version's item is read and queried.
        let store = try WorkerStateStore(directory: dir.appendingPathComponent("q"))
        try await store.apply(Array(versions.prefix(6).reversed()), topic: "ferry.tables.posts", partition: 0, next: 6)
        #expect(try await store.currentItem(table: "posts", itemKey: key)?.record?.item["title"] == .string("v6"))
        #expect(try await store.queryItems(ItemQuery(table: "posts", partitionKey: "p1")).map(\.version) == [6])
    }

    /// Numeric sort keys order exactly, as DynamoDB orders them: as Doubles,
    /// 19-digit keys (nanosecond times) tied, so their order was arbitrary and a
    /// range ending at one took its neighbours too. A numeric partition key
    /// typed in another form (`3.0`) finds its items. Also after the migration
    /// that adds the exact order to a view written before it.
    @Test func numericSortKeysOrderExactly() async throws {
        let dir = try TestPaths.temporaryDirectory("item-order")
        // In the order DynamoDB sorts them.
        let sorted = ["-9.99E+125", "-1764355200123456790", "-1764355200123456789", "-5.5", "-5", "-0.1",
                      "-0." + String(repeating: "0", count: 129) + "1", "0", "0." + String(repeating: "0", count: 129) + "1",
                      "0.1", "0.12", "0.125", "12.5", "1764355200123456788", "1764355200123456789", "1764355200123456790",
                      "12345678901234567890123456789012345678", "1E+38", "9.99E+125"]
        func items(_ partition: AttributeValue) -> [ItemVersion] {
            sorted.enumerated().map { i, n in
                let keys: AttributeMap = ["p": partition, "t": .number(n)]
                return ItemVersion(table: "events", itemKey: "[\(partition),{\"N\":\"\(n)\"}]", version: 1,
                                   record: ItemRecord(table: "events", keySchema: ["p", "t"], keys: keys, item: keys, version: 1, owner: nil,
                                                      requestId: "r\(i)", updatedAt: ""))
            }
        }
        func sortKeys(_ records: [ItemRecord]) -> [String] { records.compactMap { $0.keys["t"]?.stringValue } }
        func check(_ store: WorkerStateStore, _ when: String) async throws {
            #expect(sortKeys(try await store.queryItems(ItemQuery(table: "events", partitionKey: "u"))) == sorted, "\(when)")
            let range = try await store.queryItems(ItemQuery(table: "events", partitionKey: "u", from: "1764355200123456789",
                                                             to: "1764355200123456790"))
            #expect(sortKeys(range) == ["1764355200123456789", "1764355200123456790"], "\(when)")
            let negative = try await store.queryItems(ItemQuery(table: "events", partitionKey: "u", from: "-1764355200123456790", to: "-5.50"))
            #expect(sortKeys(negative) == ["-1764355200123456790", "-1764355200123456789", "-5.5"], "\(when)")
            #expect(try await store.queryItems(ItemQuery(table: "events", partitionKey: "3.0")).count == sorted.count, "\(when)")
            // The in-memory view's rules (ItemQuery) agree with SQLite's.
            let all = items(.string("u")).compactMap(\.record).shuffled()
            #expect(sortKeys(all.filter(ItemQuery(table: "events", partitionKey: "u").matches).sorted(by: ItemQuery.sortKeyOrder)) == sorted)
            #expect(sortKeys(all.filter(ItemQuery(table: "events", partitionKey: "u", from: "1764355200123456789",
                                                  to: "1764355200123456790").matches)).sorted() == ["1764355200123456789", "1764355200123456790"])
        }
        do {
            let store = try WorkerStateStore(directory: dir)
            try await store.apply(items(.string("u")).shuffled() + items(.number("3")), topic: "ferry.tables.events", partition: 0, next: 1)
            try await check(store, "as written")
        }
        // The view as a worker of the version before kept it: no exact order, then opened again.
        let downgrade = """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            db.execute("DROP INDEX item_view_order")
            db.execute("ALTER TABLE item_view DROP COLUMN sortOrder")
            db.execute("DELETE FROM grdb_migrations WHERE identifier = 'v7-item-sort-order'")
            db.commit()
            """
        _ = try await runChecked("python3", ["-c", downgrade, dir.appendingPathComponent("ferry.sqlite").path])
        let reopened = try WorkerStateStore(directory: dir)
        try await check(reopened, "after the migration")
    }

    /// String sort keys order, bound and prefix-match by their UTF-8 bytes, as
    /// DynamoDB's do, in SQLite's view and in readers' in-memory rules alike
    /// (the in-memory rules compared characters: `e\u{301}` equal to `é`; and
    /// SQLite's prefix took as many code points as the prefix had characters,
    /// so a prefix ending in a combining mark matched nothing).
    @Test func stringSortKeysOrderByBytes() async throws {
        let dir = try TestPaths.temporaryDirectory("item-string-order")
        let keys = ["a", "e\u{301}", "e\u{301}x", "z", "\u{e9}", "\u{e9}x", "K", "\u{212A}", "\u{fc}ber", "\u{1F600}"]
        let sorted = keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        let changes = keys.enumerated().map { i, k -> ItemVersion in
            let keyMap: AttributeMap = ["p": .string("u"), "t": .string(k)]
            return ItemVersion(table: "notes", itemKey: "[{\"S\":\"u\"},{\"S\":\"\(i)\"}]", version: 1,
                               record: ItemRecord(table: "notes", keySchema: ["p", "t"], keys: keyMap, item: keyMap, version: 1, owner: nil,
                                                  requestId: "r\(i)", updatedAt: ""))
        }
        let store = try WorkerStateStore(directory: dir)
        try await store.apply(changes, topic: "ferry.tables.notes", partition: 0, next: 1)
        func bytes(_ records: [ItemRecord]) -> [[UInt8]] { records.compactMap { $0.keys["t"]?.stringValue.map { Array($0.utf8) } } }
        let records = changes.compactMap(\.record).shuffled()
        let queries: [(ItemQuery, [String])] = [
            (ItemQuery(table: "notes", partitionKey: "u"), sorted),
            (ItemQuery(table: "notes", partitionKey: "u", sortKeyPrefix: "e\u{301}"), ["e\u{301}", "e\u{301}x"]),
            (ItemQuery(table: "notes", partitionKey: "u", sortKeyPrefix: "\u{e9}"), ["\u{e9}", "\u{e9}x"]),
            (ItemQuery(table: "notes", partitionKey: "u", from: "e\u{301}", to: "\u{e9}"), sorted.filter {
                !$0.utf8.lexicographicallyPrecedes("e\u{301}".utf8) && !"\u{e9}".utf8.lexicographicallyPrecedes($0.utf8)
            }),
        ]
        for (query, expected) in queries {
            let want = expected.map { Array($0.utf8) }
            #expect(bytes(try await store.queryItems(query)) == want, "SQLite: \(query)")
            #expect(bytes(records.filter(query.matches).sorted(by: ItemQuery.sortKeyOrder)) == want, "in memory: \(query)")
        }
    }
}
