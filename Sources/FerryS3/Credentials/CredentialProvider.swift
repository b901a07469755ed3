import FerryCore
import FerryStorage
import Foundation
import Logging
import Synchronization

/// Where an S3 client gets the keys it signs with. `credentials()` is asked
/// for every request, so a provider of temporary credentials can hand out new
/// keys in the middle of a transfer: a part signed after a refresh uses them.
public protocol CredentialProvider: Sendable {
    /// Which provider supplies the keys (`environment`, `web-identity`,
    /// `profile dev (assume-role)`, …), for `ferry config check` and logs; never a secret.
    var source: String { get }
    func credentials() async throws(FerryError) -> AWSCredentials
}

/// Long-term keys (flags, variables, a profile's static keys).
public struct StaticCredentialProvider: CredentialProvider {
    public let source: String
    private let value: AWSCredentials

    public init(_ credentials: AWSCredentials, source: String = "static") {
        self.value = credentials
        self.source = source
    }

    public func credentials() async throws(FerryError) -> AWSCredentials { value }
}

/// Temporary credentials from `fetch`, cached and renewed before they expire.
///
/// Within the refresh window (the last 5 minutes, or the last half of a
/// shorter lifetime) callers still get the current keys while one background
/// fetch runs; only missing or (almost) expired keys make callers wait for
/// it. A failed refresh is logged and retried at most every 5 s while the
/// old keys last, so a brief STS or metadata outage does not stop transfers.
/// Expiry is reckoned by the source's clock, which need not agree with this
/// machine's (`onLocalClock`).
public final class RefreshingCredentialProvider: CredentialProvider {
    public let source: String
    private let fetch: @Sendable () async throws(FerryError) -> AWSCredentials
    private let logger: Logger
    private let localTime: @Sendable () -> Date
    private let state = Mutex<State>(State())

    static let retryAfterFailure: TimeInterval = 5
    /// The longest any source makes temporary keys last (STS's GetSessionToken: 36 hours).
    static let longestLifetime: TimeInterval = 36 * 3600

    private struct State {
        var current: AWSCredentials?
        var obtainedAt = Date.distantPast
        var refresh: Task<Result<AWSCredentials, FerryError>, Never>?
        var lastFailure: (at: Date, error: FerryError)?
        /// The source's clock less this machine's, as last said in a warning.
        var warnedOffset: TimeInterval = 0
    }

    /// `localTime` stands in for this machine's clock (tests).
    public init(source: String, logger: Logger = Logger(label: "ferry.credentials"),
                localTime: @escaping @Sendable () -> Date = { Date() },
                fetch: @escaping @Sendable () async throws(FerryError) -> AWSCredentials) {
        self.source = source
        self.fetch = fetch
        self.logger = logger
        self.localTime = localTime
    }

    public func credentials() async throws(FerryError) -> AWSCredentials {
        let now = localTime()
        enum Next { case use(AWSCredentials), wait(Task<Result<AWSCredentials, FerryError>, Never>), fail(FerryError) }
        let next: Next = state.withLock { s in
            let usable = s.current.flatMap { Self.isUsable($0, obtainedAt: s.obtainedAt, now: now) ? $0 : nil }
            if let usable, !Self.inRefreshWindow(usable, obtainedAt: s.obtainedAt, now: now) { return .use(usable) }
            if s.refresh == nil {
                if let failure = s.lastFailure, now.timeIntervalSince(failure.at) < Self.retryAfterFailure {
                    return usable.map(Next.use) ?? .fail(failure.error)
                }
                s.refresh = Task { await self.renew() }
            }
            if let usable { return .use(usable) }
            return .wait(s.refresh!)
        }
        switch next {
        case .use(let credentials): return credentials
        case .fail(let error): throw error
        case .wait(let task): return try await task.value.get()
        }
    }

    /// Whether a fetch of new keys is under way (tests).
    var isRenewing: Bool { state.withLock { $0.refresh != nil } }

    /// Keys this close to their expiry are not used: a request signed now may
    /// arrive later. 10 s, or a tenth of a shorter lifetime.
    static func isUsable(_ credentials: AWSCredentials, obtainedAt: Date, now: Date) -> Bool {
        guard let expiration = credentials.expiration else { return true }
        return expiration.timeIntervalSince(now) > min(10, expiration.timeIntervalSince(obtainedAt) / 10)
    }

    /// Within min(5 min, half the lifetime) of the expiry.
    static func inRefreshWindow(_ credentials: AWSCredentials, obtainedAt: Date, now: Date) -> Bool {
        guard let expiration = credentials.expiration else { return false }
        let lifetime = expiration.timeIntervalSince(obtainedAt)
        return expiration.timeIntervalSince(now) < min(300, lifetime / 2)
    }

    /// Temporary keys' expiry is written on their source's clock. When the
    /// source's `Date` says what that clock read, the expiry is moved onto
    /// this machine's clock, keeping the lifetime the source gave: on a clock
    /// behind, keys would otherwise be used after the store stopped taking
    /// them; on one ahead, renewed at every request. Returns the keys so
    /// moved, and the source's clock less this machine's (0 when not moved).
    static func onLocalClock(_ credentials: AWSCredentials, receivedAt: Date) -> (credentials: AWSCredentials, offset: TimeInterval) {
        guard let expiration = credentials.expiration, let sourceTime = credentials.sourceTime,
              case let lifetime = expiration.timeIntervalSince(sourceTime),
              lifetime > 0, lifetime <= Self.longestLifetime else {
            // No `Date`, or one that is not the clock the expiry was written on (a
            // proxy's, a broken one): keys already over, or lasting longer than
            // any source gives. Then the expiry is taken as written.
            return (credentials, 0)
        }
        // `Date` has whole seconds: the source's time was within the second after it.
        let offset = sourceTime.addingTimeInterval(0.5).timeIntervalSince(receivedAt)
        var moved = credentials
        moved.expiration = expiration.addingTimeInterval(-offset)
        return (moved, offset)
    }

    private func renew() async -> Result<AWSCredentials, FerryError> {
        var result: Result<AWSCredentials, FerryError>
        do throws(FerryError) {
            result = .success(try await fetch())
        } catch {
            result = .failure(error)
        }
        var offset: TimeInterval = 0
        if case .success(let fetched) = result {
            let moved = Self.onLocalClock(fetched, receivedAt: localTime())
            result = .success(moved.credentials)
            offset = moved.offset
        }
        // Within a minute is what a `Date`'s whole second and a clock kept by NTP give: not worth a word.
        let far = abs(offset) >= SigningClock.smallestCorrection
        let warn = state.withLock { s in
            s.refresh = nil
            switch result {
            case .success(let credentials):
                s.current = credentials
                s.obtainedAt = localTime()
                s.lastFailure = nil
            case .failure(let error):
                s.lastFailure = (localTime(), error)
                return false
            }
            // One line when a difference of a minute or more appears, changes or goes, not one per renewal.
            guard abs((far ? offset : 0) - s.warnedOffset) >= SigningClock.smallestCorrection else { return false }
            s.warnedOffset = far ? offset : 0
            return true
        }
        switch result {
        case .success(let credentials):
            let seconds = Int(offset.rounded())
            let clock = far ? " (this machine's clock; the source's is \(abs(seconds)) s \(seconds > 0 ? "ahead" : "behind"))" : ""
            let until = credentials.expiration.map { ", valid until \(Timestamp.iso8601($0))\(clock)" } ?? ""
            logger.info("credentials from \(source): access key \(credentials.accessKeyId)\(until)")
            if warn && !far {
                logger.info("credentials from \(source): the source's clock now agrees with this machine's")
            } else if warn {
                logger.warning("""
                    credentials from \(source) come from a clock \(abs(seconds)) s \(seconds > 0 ? "ahead of" : "behind") this machine's: \
                    they are taken to last the time the source gave them from when they came, and renewed by that reckoning. \
                    One of the two clocks is wrong: set it right (NTP)
                    """, metadata: ["offset_seconds": "\(seconds)"])
            }
        case .failure(let error):
            logger.warning("cannot renew credentials from \(source) (the current keys are used while they last): \(error)")
        }
        return result
    }
}
