import FerryCore
import Foundation
import Logging
import Synchronization
import FerryConcurrency

/// Guards the checks every message passes before its transfer (decoding,
/// identity, access rules, preflight): they are quick, synchronous work, so
/// one that runs past `limitSeconds` is stuck where no cancellation reaches
/// (a loop: a hostile destination once looped in a path walk). Then the
/// process exits (code 70) with a line naming the message. Its start is
/// already recorded, so the crash-loop breaker counts the exit like a crash
/// and, after `--max-starts`, dead-letters the message as `PoisonMessage`: a
/// hang cannot hold a partition (or a shutdown) for good.
final class CheckWatchdog: Sendable {
    /// Generous: the checks take milliseconds; a worker under heavy load is still far below it.
    static let limitSeconds: Double = TestTrap.checkLimitSeconds ?? 60

    private let position: String
    private let logger: Logger
    /// nil once disarmed.
    private let timer: Mutex<DeadlineTimer?>

    init(_ position: String, logger: Logger) {
        self.position = position
        self.logger = logger
        timer = Mutex(Self.arm(position, logger: logger))
    }

    private static func arm(_ position: String, logger: Logger) -> DeadlineTimer {
        DeadlineTimer.start(after: limitSeconds) {
            let limit = Int(limitSeconds)
            logger.critical("the checks of message \(position) have run for \(limit) s: stuck where nothing can stop them; exiting so that the crash-loop breaker counts this start (the message is quarantined after --max-starts)")
            exit(70)
        }
    }

    /// The checks are over (accepted or refused).
    func disarm() { timer.withLock { $0?.cancel(); $0 = nil } }

    /// Waits for `body` off the clock (a wait for another message, which may
    /// rightly take hours), then gives the checks their whole limit again.
    func pause(during body: () async -> Void) async {
        let armed = timer.withLock { t -> DeadlineTimer? in defer { t = nil }; return t }
        armed?.cancel()
        await body()
        guard armed != nil else { return }
        let next = Self.arm(position, logger: logger)
        timer.withLock { $0 = next }
    }
}
