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
}
