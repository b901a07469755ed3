import Synchronization

/// Runs one piece of async work at a time and shares its result: a call made
/// while a run is under way waits for that run and takes its result instead
/// of starting its own; a call after it ended starts the next. The requests
/// of a store that fell silent fail together, and they send one probe of the
/// store, not one each. A caller's cancellation does not reach the shared
/// run (the others still want its answer).
public final class SingleFlight<Value: Sendable>: Sendable {
    private let underWay = Mutex<Task<Value, Never>?>(nil)

    public init() {}

    public func run(_ work: @escaping @Sendable () async -> Value) async -> Value {
        let run = underWay.withLock { current in
            if let current { return current }
            let started = Task { await work() }
            current = started
            return started
        }
        let value = await run.value
        underWay.withLock { if $0 == run { $0 = nil } }
        return value
    }
}
