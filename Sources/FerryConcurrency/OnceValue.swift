import Synchronization

/// A value set once and awaited by any number of tasks, before or after it
/// is set: a download's first response head, the end of a replay.
public final class OnceValue<Value: Sendable>: Sendable {
    private let state = Mutex<(value: Value?, waiters: [CheckedContinuation<Value, Never>])>((nil, []))

    public init() {}

    /// Sets the value and releases the waiters; only the first call counts (true for it).
    @discardableResult
    public func deliver(_ value: Value) -> Bool {
        let waiters: [CheckedContinuation<Value, Never>]? = state.withLock { s in
            guard s.value == nil else { return nil }
            s.value = value
            defer { s.waiters = [] }
            return s.waiters
        }
        waiters?.forEach { $0.resume(returning: value) }
        return waiters != nil
    }

    /// The value, once it is set.
    public var value: Value {
        get async {
            await withCheckedContinuation { continuation in
                let now = state.withLock { s -> Value? in
                    if let value = s.value { return value }
                    s.waiters.append(continuation)
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        }
    }
}
