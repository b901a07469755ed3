import Synchronization

/// How long each step of a graceful stop took, for one log line at its end.
/// A stop has a bound (the shutdown grace plus a tail, after which the process
/// exits anyway): a stop that comes near it says which step held it.
public final class ShutdownSteps: Sendable {
    private struct State {
        var start: ContinuousClock.Instant?
        var last: ContinuousClock.Instant?
        var steps: [(name: String, took: Duration)] = []
    }
    private let state = Mutex(State())

    public init() {}

    /// The stop began (the task was cancelled). Only the first call counts.
    public func begin() {
        state.withLock { s in
            guard s.start == nil else { return }
            s.start = .now
            s.last = s.start
        }
    }

    /// Whether `begin` was called: a stop that ends without it was not asked for.
    public var begun: Bool { state.withLock { $0.start != nil } }

    /// `name` ended now: it took the time since `begin` or the step before.
    /// Nothing is recorded before `begin`.
    public func ended(_ name: String) {
        state.withLock { s in
            guard let last = s.last else { return }
            let now = ContinuousClock.Instant.now
            s.steps.append((name, now - last))
            s.last = now
        }
    }

    /// Past this many seconds a stop is logged as a warning: it is nearing its bound.
    public static let slowAfterSeconds: Double = 10

    /// Whether the stop has taken longer than `slowAfterSeconds` so far.
    public var isSlow: Bool { elapsedSeconds > Self.slowAfterSeconds }

    /// Seconds since `begin` (0 before it).
    public var elapsedSeconds: Double {
        state.withLock { s in s.start.map { $0.duration(to: .now).inSeconds } ?? 0 }
    }

    /// "2.3 s: transfers in flight 0.0 s, outbox 2.1 s, …".
    public var summary: String {
        state.withLock { s in
            let total = s.start.map { $0.duration(to: .now).inSeconds } ?? 0
            let steps = s.steps.map { "\($0.name) \(Self.format($0.took.inSeconds)) s" }
            return "\(Self.format(total)) s: " + (steps.isEmpty ? "no steps" : steps.joined(separator: ", "))
        }
    }

    private static func format(_ seconds: Double) -> String {
        let tenths = (seconds * 10).rounded()
        return "\(Int(tenths) / 10).\(Int(tenths) % 10)"
    }
}
