import FerryCore
import FerryTables

/// The record tables a worker serves: their definitions (from `--table`),
/// the follower that keeps its view of their topics, and the per-item turns
/// that make one item's writes run one at a time.
struct ItemTables: Sendable {
    let definitions: [String: TableDefinition]
    let follower: TableFollower?
    /// Taken at processing time by item key, so writes of one item never
    /// overlap even when a producer keyed their messages differently.
    let itemTurns = KeyedTurns()

    init(definitions: [TableDefinition], follower: TableFollower?) {
        self.definitions = Dictionary(definitions.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        self.follower = follower
    }

    static let none = ItemTables(definitions: [], follower: nil)
}
