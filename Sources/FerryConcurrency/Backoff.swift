/// The one retry policy of a Ferry process: the wait before retry n is the
/// first delay doubled n−1 times, up to a cap, and with full jitter (uniform
/// between zero and that ceiling, AWS's recommendation) so that workers that
/// failed together do not all come back together. Each retry loop in Ferry
/// uses one of the named configurations below, so the shapes are listed here
/// and nowhere else.
public struct Backoff: Sendable, Hashable {
    public enum Jitter: Sendable, Hashable {
        /// Uniform in [0, ceiling].
        case full
        /// Exactly the ceiling: for delays a user configured and reads back
        /// (a trigger's `retryDelaySeconds`, doubled per retry, as documented).
        case none
    }

    /// The ceiling before the first retry, in seconds.
    public var first: Double
    /// No wait is longer than this.
    public var cap: Double
    public var jitter: Jitter

    /// Total for any input: a non-finite or negative `first` waits nothing,
    /// a non-finite `cap` is the largest finite one, so no wait is NaN or
    /// infinite (`Double.random(in:)` traps on such a range).
    public init(first: Double, cap: Double, jitter: Jitter = .full) {
        self.first = first.isFinite ? max(0, first) : 0
        self.cap = cap.isFinite ? max(0, cap) : .greatestFiniteMagnitude
        self.jitter = jitter
    }

    /// `first`·2^(retry−1), at most `cap` (retry counts from 1).
    public func ceiling(beforeRetry retry: Int) -> Double {
        min(cap, first * Double(1 << min(max(retry - 1, 0), 30)))
    }

    /// The wait before retry `retry`, jitter applied.
    public func delay(beforeRetry retry: Int) -> Double {
        let ceiling = ceiling(beforeRetry: retry)
        switch jitter {
        case .full: return ceiling > 0 ? Double.random(in: 0...ceiling) : 0
        case .none: return ceiling
        }
    }

    /// Waits before retry `retry`; false when the task is cancelled meanwhile.
    public func pause(beforeRetry retry: Int) async -> Bool {
        (try? await Task.sleep(for: .seconds(clamping: delay(beforeRetry: retry)))) != nil
    }

    /// Runs `body` until it succeeds and returns its result, or nil once the
    /// task is cancelled. `failed` sees each failure and the retry it leads to
    /// (1, 2, …), before the wait.
    public func untilSuccess<T: Sendable>(failed: (any Error, Int) -> Void,
                                          _ body: () async throws -> T) async -> T? {
        var retry = 0
        while !Task.isCancelled {
            do {
                return try await body()
            } catch {
                retry += 1
                failed(error, retry)
                guard await pause(beforeRetry: retry) else { return nil }
            }
        }
        return nil
    }

    // MARK: The configurations

    /// Writes to the worker's own SQLite state (outbox, record views): a
    /// disk that refuses is usually full or busy for a moment.
    public static let localState = Backoff(first: 0.1, cap: 5)
    /// A round of the outbox drainer that Kafka did not take.
    public static let outboxDrain = Backoff(first: 0.1, cap: 5)
    /// Failure records and dead letters to Kafka, which must land before an
    /// offset moves past them.
    public static let kafkaRecord = Backoff(first: 0.2, cap: 10)
    /// Asking the group coordinator (pinning a starting position): a broker
    /// that is electing or starting answers within seconds, not milliseconds.
    public static let coordinator = Backoff(first: 1, cap: 30)
    /// Publishing an ingested change to Kafka.
    public static let ingestPublish = Backoff(first: 0.5, cap: 5)
    /// Reading a record table's topic that cannot be read yet.
    public static let tableTopic = Backoff(first: 2, cap: 2)
    /// Callback deliveries to a producer's endpoint.
    public static let callback = Backoff(first: 0.5, cap: 10)
    /// A Lambda-style async invocation's retries: the registration's delay, doubled per retry.
    public static func triggerRetry(first: Double) -> Backoff { Backoff(first: first, cap: first * Double(1 << 20), jitter: .none) }
    /// A stream mapping's batch retries: the mapping's delay, doubled up to 30 s
    /// (or up to the first delay, when that is longer).
    public static func streamRetry(first: Double) -> Backoff { Backoff(first: first, cap: max(30, first), jitter: .none) }
}
