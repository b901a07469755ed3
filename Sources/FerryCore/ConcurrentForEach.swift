/// Runs `body` for each element, at most `limit` at once, creating each
/// element's task only when a place is free. A task group filled with one
/// task per element up front would hold every task (its frame and captured
/// values) from the start, and every finished one until the group is
/// awaited: memory in proportion to the whole list instead of to `limit`.
public func forEachConcurrently<S: Sequence>(_ elements: S, limit: Int,
                                             _ body: @escaping @Sendable (S.Element) async -> Void) async
where S.Element: Sendable {
    precondition(limit > 0, "forEachConcurrently needs a limit of at least 1")
    await withTaskGroup(of: Void.self) { group in
        var running = 0
        for element in elements {
            if running == limit {
                await group.next()
                running -= 1
            }
            group.addTask { await body(element) }
            running += 1
        }
    }
}
