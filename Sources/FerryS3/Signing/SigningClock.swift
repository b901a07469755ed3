import FerryStorage
import Foundation
import Logging
import Metrics
import Synchronization

/// The time a client signs its requests with: this machine's clock, moved by
/// what its store last said that clock is off by. S3 refuses a signature
/// dated more than 15 minutes from its own time (`RequestTimeTooSkewed`), so
/// a worker whose clock drifted would fail every request; the refusal carries
/// the store's `Date`, from which the client learns the difference and signs
/// again, as AWS's SDKs do. The offset is learned anew on each refusal (never
/// added to), so a clock put right later is followed as well.
public final class SigningClock: Sendable {
    /// The store's time minus this machine's, in milliseconds.
    private let offsetMilliseconds = Atomic<Int64>(0)
    private let localTime: @Sendable () -> Date
    private let endpoint: String
    /// What the server is called in the warning ("store", "STS").
    private let peer: String
    /// The gauge that shows the offset.
    private let metric: String
    private let logger = Logger(label: "ferry.s3")
    /// A refusal is corrected only when the store's time is at least this far
    /// from the time signed with: closer than that, the signing time was not
    /// what the store refused, and signing again would not help.
    static let smallestCorrection: TimeInterval = 60
    /// S3's window: a signature dated further than this from the store's time is refused.
    static let allowedSkew: TimeInterval = 15 * 60

    /// `localTime` stands in for this machine's clock (tests).
    public init(endpoint: String, peer: String = "store", metric: String = "ferry_s3_clock_offset_seconds",
                localTime: @escaping @Sendable () -> Date = { Date() }) {
        self.endpoint = endpoint
        self.peer = peer
        self.metric = metric
        self.localTime = localTime
    }

    /// The time to sign with now.
    public func now() -> Date {
        localTime().addingTimeInterval(Double(offsetMilliseconds.load(ordering: .relaxed)) / 1000)
    }

    /// The store's time minus this machine's, as last learned (0 until a refusal).
    public var offset: TimeInterval { Double(offsetMilliseconds.load(ordering: .relaxed)) / 1000 }

    /// A request signed at `signedAt` was refused as too far from the store's
    /// time, which its answer's `Date` header gave as `serverDate`; `named`
    /// says whether the refusal said so (`RequestTimeTooSkewed`) or had no
    /// body to say it (a HEAD's), when only a difference past S3's window
    /// makes the time the likely cause; `refusal` names it for the warning.
    /// Returns whether the clock moved, so that signing again can succeed.
    func correct(signedAt: Date, serverDate: Date, named: Bool = true, refusal: String = "RequestTimeTooSkewed") -> Bool {
        // `Date` has whole seconds: the store's time was within the second after it.
        let server = serverDate.addingTimeInterval(0.5)
        let least = named ? Self.smallestCorrection : Self.allowedSkew - Self.smallestCorrection
        guard abs(server.timeIntervalSince(signedAt)) >= least else { return false }
        let learned = Int64((server.timeIntervalSince(localTime()) * 1000).rounded())
        let before = offsetMilliseconds.exchange(learned, ordering: .relaxed)
        // Requests refused together all learn it; one line says so.
        guard abs(learned - before) >= Int64(Self.smallestCorrection * 1000) else { return true }
        Gauge(label: metric).record(Double(learned) / 1000)
        let seconds = Int((Double(learned) / 1000).rounded())
        if abs(Double(learned) / 1000) < Self.smallestCorrection {
            logger.warning("\(endpoint) refused a request signed with the \(peer)'s time as learned before: this machine's clock now agrees with the \(peer)'s, and requests are signed with it again",
                           metadata: ["offset_seconds": "\(seconds)"])
            return true
        }
        logger.warning("""
            \(endpoint) refused a request as signed too far from its time (\(refusal)): this machine's clock is \
            \(abs(seconds)) s \(seconds > 0 ? "behind" : "ahead of") the \(peer)'s; requests are now signed with the \(peer)'s time. \
            Set the clock right (NTP): other programs here, and presigned URLs made before a request was refused, still use the wrong time
            """, metadata: ["offset_seconds": "\(seconds)"])
        return true
    }
}
