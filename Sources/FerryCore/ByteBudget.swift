import Synchronization

/// A weighted limit for async code: holders reserve a number of bytes and
/// wait, in arrival order, until that many are free. A reservation larger than
/// the whole budget waits for the budget to be empty, then runs alone.
public final class ByteBudget: Sendable {
    private struct State {
        var available: Int64
        var waiters: [(bytes: Int64, continuation: CheckedContinuation<Void, Never>)] = []
    }
    private let state: Mutex<State>
    public let capacity: Int64

    public init(capacity: Int64) {
        precondition(capacity > 0, "a budget must allow at least one byte")
        self.capacity = capacity
        state = Mutex(State(available: capacity))
    }

    /// Bytes reserved now.
    public var inUse: Int64 { capacity - state.withLock { $0.available } }

    /// Reserves `bytes` (clamped to the capacity) and returns the amount to release.
    public func reserve(_ bytes: Int64) async -> Int64 {
        let amount = min(max(bytes, 0), capacity)
        await withCheckedContinuation { continuation in
            let granted = state.withLock { s in
                if s.waiters.isEmpty && s.available >= amount { s.available -= amount; return true }
                s.waiters.append((amount, continuation))
                return false
            }
            if granted { continuation.resume() }
        }
        return amount
    }

    public func release(_ amount: Int64) {
        let ready: [CheckedContinuation<Void, Never>] = state.withLock { s in
            s.available += amount
            var ready: [CheckedContinuation<Void, Never>] = []
            while let first = s.waiters.first, first.bytes <= s.available {
                s.available -= first.bytes
                ready.append(first.continuation)
                s.waiters.removeFirst()
            }
            return ready
        }
        ready.forEach { $0.resume() }
    }
}
