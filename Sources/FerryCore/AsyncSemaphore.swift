import Synchronization

/// A counting limit for async code (transfers in flight, connections, parts).
/// Waiters are served in arrival order. `inUse` is observable for metrics and backpressure.
public final class AsyncSemaphore: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state: Mutex<State>
    public let limit: Int

    public init(limit: Int) {
        precondition(limit > 0, "a limit must allow at least one")
        self.limit = limit
        state = Mutex(State(available: limit))
    }

    public var inUse: Int { limit - state.withLock { $0.available } }

    public func acquire() async {
        await withCheckedContinuation { continuation in
            let granted = state.withLock { s in
                if s.available > 0 { s.available -= 1; return true }
                s.waiters.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    public func release() {
        let next: CheckedContinuation<Void, Never>? = state.withLock { s in
            if s.waiters.isEmpty { s.available += 1; return nil }
            return s.waiters.removeFirst()
        }
        next?.resume()
    }
}
