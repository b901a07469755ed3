import FerryCore
import FerryConcurrency

/// Which failures are tried again and how long to wait: exponential backoff
/// with full jitter (AWS's recommendation), capped.
public struct RetryPolicy: Sendable, Hashable {
    /// Retries after the first attempt; 0 means one attempt only.
    public var retryLimit: Int
    public var baseDelaySeconds: Double
    public var maxDelaySeconds: Double

    public init(retryLimit: Int = 3, baseDelaySeconds: Double = 0.2, maxDelaySeconds: Double = 20) {
        self.retryLimit = max(0, retryLimit)
        self.baseDelaySeconds = baseDelaySeconds
        self.maxDelaySeconds = maxDelaySeconds
    }

    /// Transient failures: the network, throttling and the server's own errors.
    /// Authorization and validation failures are final.
    public static func isRetryable(_ error: FerryError) -> Bool {
        switch error.code {
        case .connectionError, .slowDown, .badDigest, .credentialsUnavailable: return true
        case .storageError:
            // ConditionalRequestConflict (409): another conditional write to the key was under way.
            return ["HTTP 500", "HTTP 502", "HTTP 503", "HTTP 504", "RequestTimeout", "InternalError", "ConditionalRequestConflict"]
                .contains { error.message.contains($0) }
        default: return false
        }
    }

    /// The process's `Backoff` in this policy's shape: full jitter under
    /// min(max, base·2^retry). After `SlowDown` the ceiling is four times
    /// higher: the server asked for a lower pace.
    public func backoff(after error: FerryError? = nil) -> Backoff {
        let base = error?.code == .slowDown ? baseDelaySeconds * 4 : baseDelaySeconds
        return Backoff(first: 2 * base, cap: maxDelaySeconds)
    }

    /// The wait before retry number `retry` (1-based).
    public func delay(beforeRetry retry: Int, after error: FerryError? = nil) -> Double {
        backoff(after: error).delay(beforeRetry: retry)
    }

    /// Runs `body`, retrying retryable failures; `onRetry` sees each failure
    /// retried. `stopsRetrying` is asked before each retry: true ends the
    /// retries with that failure.
    public func run<T: Sendable>(onRetry: (Int, FerryError) -> Void = { _, _ in },
                                 stopsRetrying: (FerryError) async -> Bool = { _ in false },
                                 _ body: () async throws(FerryError) -> T) async throws(FerryError) -> T {
        var attempt = 0
        while true {
            do {
                return try await body()
            } catch {
                attempt += 1
                guard attempt <= retryLimit, Self.isRetryable(error) else { throw error }
                if await stopsRetrying(error) { throw error }
                onRetry(attempt, error)
                do {
                    try await Task.sleep(for: .seconds(clamping: delay(beforeRetry: attempt, after: error)))
                } catch {
                    throw FerryError(.internalError, "cancelled while waiting to retry")
                }
            }
        }
    }
}
