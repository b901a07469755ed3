import Synchronization

/// A weighted limit for async code: holders reserve a number of bytes and
/// wait, in arrival order, until that many are free. A reservation larger than
/// the whole budget waits for the budget to be empty, then runs alone.
public final class ByteBudget: Sendable {
    private struct Waiter {
        var id: UInt64
        var bytes: Int64
        var continuation: CheckedContinuation<Bool, Never>
    }
    private struct State {
        var available: Int64
        var waiters: [Waiter] = []
        var nextId: UInt64 = 0
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
        while !(await reserve(amount: amount, cancellable: false)) {}
        return amount
    }

    /// Reserves `bytes` (clamped) unless the calling task is cancelled while it
    /// waits; returns the amount to release, or nil when cancelled (nothing held).
    public func reserveUnlessCancelled(_ bytes: Int64) async -> Int64? {
        let amount = min(max(bytes, 0), capacity)
        return await reserve(amount: amount, cancellable: true) ? amount : nil
    }

    private func reserve(amount: Int64, cancellable: Bool) async -> Bool {
        let id = state.withLock { s in defer { s.nextId += 1 }; return s.nextId }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let granted: Bool? = state.withLock { s in
                    if s.waiters.isEmpty && s.available >= amount { s.available -= amount; return true }
                    if cancellable && Task.isCancelled { return false }
                    s.waiters.append(Waiter(id: id, bytes: amount, continuation: continuation))
                    return nil
                }
                if let granted { continuation.resume(returning: granted) }
            }
        } onCancel: {
            guard cancellable else { return }
            let removed: Waiter? = state.withLock { s in
                guard let index = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return s.waiters.remove(at: index)
            }
            removed?.continuation.resume(returning: false)
            // The head may have been waiting behind it.
            if removed != nil { release(0) }
        }
    }

    public func release(_ amount: Int64) {
        let ready: [CheckedContinuation<Bool, Never>] = state.withLock { s in
            s.available += amount
            var ready: [CheckedContinuation<Bool, Never>] = []
            while let first = s.waiters.first, first.bytes <= s.available {
                s.available -= first.bytes
                ready.append(first.continuation)
                s.waiters.removeFirst()
            }
            return ready
        }
        ready.forEach { $0.resume(returning: true) }
    }
}
