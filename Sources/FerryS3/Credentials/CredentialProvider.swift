import FerryCore
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
public final class RefreshingCredentialProvider: CredentialProvider {
    public let source: String
    private let fetch: @Sendable () async throws(FerryError) -> AWSCredentials
    private let logger: Logger
    private let state = Mutex<State>(State())

    static let retryAfterFailure: TimeInterval = 5

    private struct State {
        var current: AWSCredentials?
        var obtainedAt = Date.distantPast
        var refresh: Task<Result<AWSCredentials, FerryError>, Never>?
        var lastFailure: (at: Date, error: FerryError)?
    }

    public init(source: String, logger: Logger = Logger(label: "ferry.credentials"),
                fetch: @escaping @Sendable () async throws(FerryError) -> AWSCredentials) {
        self.source = source
        self.fetch = fetch
        self.logger = logger
    }

    public func credentials() async throws(FerryError) -> AWSCredentials {
        let now = Date()
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

    private func renew() async -> Result<AWSCredentials, FerryError> {
        let result: Result<AWSCredentials, FerryError>
        do throws(FerryError) {
            result = .success(try await fetch())
        } catch {
            result = .failure(error)
        }
        state.withLock { s in
            s.refresh = nil
            switch result {
            case .success(let credentials):
                s.current = credentials
                s.obtainedAt = Date()
                s.lastFailure = nil
            case .failure(let error):
                s.lastFailure = (Date(), error)
            }
        }
        switch result {
        case .success(let credentials):
            let until = credentials.expiration.map { ", valid until \(Timestamp.iso8601($0))" } ?? ""
            logger.info("credentials from \(source): access key \(credentials.accessKeyId)\(until)")
        case .failure(let error):
            logger.warning("cannot renew credentials from \(source) (the current keys are used while they last): \(error)")
        }
        return result
    }
}
