import Synchronization

/// Lets ordinary requests run side by side and a suspect run alone: a
/// reader-writer lock for async code, writers first. The crash-loop breaker
/// runs a message that was in flight when a worker died with nothing else
/// beside it, so that if it kills the worker again, the start counted
/// against it is its own and not a neighbour's.
final class IsolationGate: Sendable {
    private struct State {
        var shared = 0
        var exclusive = false
        var waitingExclusive: [CheckedContinuation<Void, Never>] = []
        var waitingShared: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    /// Waits for the gate: `exclusive` until nothing else holds it, otherwise
    /// while an exclusive holder runs or waits.
    func enter(exclusive: Bool) async {
        await withCheckedContinuation { continuation in
            let admitted = state.withLock { s -> Bool in
                if exclusive {
                    if s.shared == 0 && !s.exclusive { s.exclusive = true; return true }
                    s.waitingExclusive.append(continuation)
                    return false
                }
                if !s.exclusive && s.waitingExclusive.isEmpty { s.shared += 1; return true }
                s.waitingShared.append(continuation)
                return false
            }
            if admitted { continuation.resume() }
        }
    }

    func leave(exclusive: Bool) {
        let ready: [CheckedContinuation<Void, Never>] = state.withLock { s in
            if exclusive { s.exclusive = false } else { s.shared -= 1 }
            if !s.waitingExclusive.isEmpty {
                // A suspect waits: it goes next, once the last ordinary request has left.
                guard s.shared == 0 else { return [] }
                s.exclusive = true
                return [s.waitingExclusive.removeFirst()]
            }
            let all = s.waitingShared
            s.shared += all.count
            s.waitingShared = []
            return all
        }
        ready.forEach { $0.resume() }
    }

    /// Holders now (for tests): shared count and whether an exclusive holder runs.
    var holders: (shared: Int, exclusive: Bool) { state.withLock { ($0.shared, $0.exclusive) } }
}
