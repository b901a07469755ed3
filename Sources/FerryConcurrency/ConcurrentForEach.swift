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

/// The same over an asynchronous sequence (a listing fetched page by page):
/// the next element is awaited while up to `limit` bodies run. An error from
/// the sequence starts nothing more; the bodies already started finish, then
/// it is thrown.
public func forEachConcurrently<S: AsyncSequence>(_ elements: S, limit: Int,
                                                  _ body: @escaping @Sendable (S.Element) async -> Void) async throws(S.Failure)
where S.Element: Sendable {
    precondition(limit > 0, "forEachConcurrently needs a limit of at least 1")
    let failure: S.Failure? = await withTaskGroup(of: Void.self) { group in
        var running = 0
        var iterator = elements.makeAsyncIterator()
        while true {
            let element: S.Element?
            do throws(S.Failure) { element = try await iterator.next(isolation: #isolation) } catch { return error }
            guard let element else { return nil }
            if running == limit {
                await group.next()
                running -= 1
            }
            group.addTask { await body(element) }
            running += 1
        }
    }
    if let failure { throw failure }
}
