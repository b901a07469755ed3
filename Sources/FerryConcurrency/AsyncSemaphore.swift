/// A counting limit for async code (transfers in flight, connections, parts):
/// a `ByteBudget` whose holders each take one unit. Waiters are served in
/// arrival order. `inUse` is observable for metrics and backpressure.
public final class AsyncSemaphore: Sendable {
    private let budget: ByteBudget
    public let limit: Int

    public init(limit: Int) {
        precondition(limit > 0, "a limit must allow at least one")
        self.limit = limit
        budget = ByteBudget(capacity: Int64(limit))
    }

    public var inUse: Int { Int(budget.inUse) }

    public func acquire() async { _ = await budget.reserve(1) }

    /// Takes a unit unless the calling task is cancelled while it waits; false when cancelled (nothing held).
    public func acquireUnlessCancelled() async -> Bool { await budget.reserveUnlessCancelled(1) != nil }

    public func release() { budget.release(1) }
}
