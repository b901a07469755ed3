import Synchronization

/// Lets ordinary work run side by side and a suspect run alone: a
/// reader-writer lock for async code, writers first. The crash-loop breakers
/// (of requests and of trigger invocations) run a message that was in flight
/// when a worker died with nothing else beside it, so that if it kills the
/// worker again, the start counted against it is its own and not a
/// neighbour's. A death stops the whole process, so the gate is the
/// process's (`process`): requests and invocations share it.
public final class IsolationGate: Sendable {
    /// The one gate of this process.
    public static let process = IsolationGate()

    private struct State {
        var shared = 0
        var exclusive = false
        var waitingExclusive: [CheckedContinuation<Void, Never>] = []
        var waitingShared: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())
    private let settlers = Mutex<(next: Int, all: [Int: @Sendable () async -> Void])>((0, [:]))

    public init() {}

    /// Registers how a breaker brings its start records in Kafka up to date
    /// (a commit with the records as they stand); `settleAll` runs it. Returns
    /// the key to remove it with when its consumer stops.
    public func addSettler(_ settle: @escaping @Sendable () async -> Void) -> Int {
        settlers.withLock { s in
            s.next += 1
            s.all[s.next] = settle
            return s.next
        }
    }

    public func removeSettler(_ key: Int) {
        _ = settlers.withLock { $0.all.removeValue(forKey: key) }
    }

    /// Run by a suspect once it holds the gate alone, before its start is
    /// recorded: every breaker's records in Kafka are brought up to date, so
    /// that if the suspect kills the process, work that finished before it
    /// (a request beside a trigger event, or the reverse) is not counted too.
    public func settleAll() async {
        let all = settlers.withLock { Array($0.all.values) }
        for settle in all { await settle() }
    }

    /// Waits for the gate: `exclusive` until nothing else holds it, otherwise
    /// while an exclusive holder runs or waits.
    public func enter(exclusive: Bool) async {
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

    public func leave(exclusive: Bool) {
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
    public var holders: (shared: Int, exclusive: Bool) { state.withLock { ($0.shared, $0.exclusive) } }
}
