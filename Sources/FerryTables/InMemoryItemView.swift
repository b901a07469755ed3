import FerryCore
import Synchronization

/// A view held in memory: for producers that read a table now and then
/// (`FerryClient`), at the cost of reading its topic at start.
public final class InMemoryItemView: ItemViewWriter {
    private struct State {
        var items: [String: [String: ItemVersion]] = [:]
        var positions: [String: [Int32: Int64]] = [:]
    }
    private let state = Mutex(State())

    public init() {}

    public func apply(_ changes: [ItemVersion], topic: String, partition: Int32, next: Int64) async throws {
        state.withLock { s in
            for change in changes where (s.items[change.table]?[change.itemKey]?.version ?? 0) < change.version {
                s.items[change.table, default: [:]][change.itemKey] = change
            }
            s.positions[topic, default: [:]][partition] = max(next, s.positions[topic]?[partition] ?? 0)
        }
    }

    public func position(topic: String, partition: Int32) async throws -> Int64? {
        state.withLock { $0.positions[topic]?[partition] }
    }

    public func item(table: String, itemKey: String) -> ItemRecord? {
        state.withLock { $0.items[table]?[itemKey]?.record }
    }

    /// The key attribute names of `table`'s items, from any item it holds; nil for a table with none.
    public func keySchema(table: String) -> [String]? {
        state.withLock { $0.items[table]?.values.lazy.compactMap(\.record).first?.keySchema }
    }

    public func query(_ query: ItemQuery) -> [ItemRecord] {
        let all = state.withLock { $0.items[query.table].map { Array($0.values) } ?? [] }
        return Array(all.compactMap(\.record).filter(query.matches).sorted(by: ItemQuery.sortKeyOrder).prefix(query.limit))
    }
}
