import Synchronization

/// Decides when a repeated warning is worth a log line: at most once per
/// `interval`, carrying how many times it happened since the line before.
/// A rebalance refuses every offset commit for its whole length; a line per
/// refusal would bury everything else in the log.
public final class WarningThrottle: Sendable {
    private let interval: Duration
    private let state = Mutex<(last: ContinuousClock.Instant?, unlogged: Int)>((nil, 0))

    public init(interval: Duration = .seconds(10)) {
        self.interval = interval
    }

    /// Counts one occurrence; returns the count to log when a line is due, else nil.
    public func occurred(at now: ContinuousClock.Instant = .now) -> Int? {
        state.withLock { s -> Int? in
            s.unlogged += 1
            guard s.last.map({ now - $0 >= interval }) ?? true else { return nil }
            defer { s = (now, 0) }
            return s.unlogged
        }
    }
}
