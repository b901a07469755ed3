import FerryCore
import Foundation
import Logging

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

    private let timer: DeadlineTimer

    init(_ position: String, logger: Logger) {
        timer = DeadlineTimer.start(after: Self.limitSeconds) {
            let limit = Int(Self.limitSeconds)
            logger.critical("the checks of message \(position) have run for \(limit) s: stuck where nothing can stop them; exiting so that the crash-loop breaker counts this start (the message is quarantined after --max-starts)")
            exit(70)
        }
    }

    /// The checks are over (accepted or refused).
    func disarm() { timer.cancel() }
}
