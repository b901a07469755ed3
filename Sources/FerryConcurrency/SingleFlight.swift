import Synchronization

/// Runs one piece of async work at a time and shares its result: a call made
/// while a run is under way waits for that run and takes its result instead
/// of starting its own; a call after it ended starts the next. The requests
/// of a store that fell silent fail together, and they send one probe of the
/// store, not one each. A caller's cancellation does not reach the shared
/// run (the others still want its answer).
public final class SingleFlight<Value: Sendable>: Sendable {
    private let underWay = Mutex<(run: Task<Value, Never>?, number: UInt64)>((nil, 0))

    public init() {}

    public func run(_ work: @escaping @Sendable () async -> Value) async -> Value {
        let run = underWay.withLock { current in
            if let run = current.run { return run }
            current.number &+= 1
            let number = current.number
            // The run stops being shared as its work returns, before anyone
            // resumes with its value: a call made after a caller got that
            // value never gets it too.
            let started = Task { [self] in
                let value = await work()
                underWay.withLock { if $0.number == number { $0.run = nil } }
                return value
            }
            current.run = started
            return started
        }
        return await run.value
    }
}
