import FerryKafka
import Foundation

#if FERRY_TEST_HOOKS
/// For the test suite only (compiled with the `TestHooks` trait, which
/// `scripts/test.sh` sets; release builds have the inert version below):
/// faults a test can switch on to prove that a message crashing or wedging
/// the worker ends as one `PoisonMessage` dead letter. With
/// `FERRY_TEST_TRAP_MARKER` set, a request whose bytes contain its value stops
/// the process with `fatalError`; with `FERRY_TEST_HANG_MARKER`, such a
/// request blocks its thread for good (a loop in synchronous code), and
/// `FERRY_TEST_CHECK_LIMIT_SECONDS` shortens `CheckWatchdog`'s limit.
/// `FERRY_TEST_SETTLE_DELAY_MS` waits that long before a message's start
/// record is settled after its outcome, widening the window in which a record
/// settled too late would be committed with the next suspect's start.
enum TestTrap {
    private static let environment = ProcessInfo.processInfo.environment
    private static let marker: [UInt8]? = environment["FERRY_TEST_TRAP_MARKER"].flatMap { $0.isEmpty ? nil : Array($0.utf8) }
    private static let hangMarker: [UInt8]? = environment["FERRY_TEST_HANG_MARKER"].flatMap { $0.isEmpty ? nil : Array($0.utf8) }
    static let checkLimitSeconds: Double? = environment["FERRY_TEST_CHECK_LIMIT_SECONDS"].flatMap(Double.init)
    private static let settleDelay: Duration? = environment["FERRY_TEST_SETTLE_DELAY_MS"].flatMap(Int.init)
        .map { .milliseconds(min(max($0, 0), 60_000)) }  // at most a minute: no arithmetic on it can trap

    static func beforeSettling() async {
        if let settleDelay { try? await Task.sleep(for: settleDelay) }
    }

    /// `FERRY_TEST_DEAD_LETTER_HOLD`: a worker's first `PoisonMessage` dead letter waits for its partition to leave.
    static let deadLetterHold = PartitionLeaveHold(environmentVariable: "FERRY_TEST_DEAD_LETTER_HOLD")

    static func check(_ bytes: [UInt8]) {
        if let marker, bytes.contains(marker) {
            fatalError("FERRY_TEST_TRAP_MARKER matched: trapping on purpose (test suite)")
        }
        if let hangMarker, bytes.contains(hangMarker) {
            while true { sleep(3600) }  // stuck on purpose, where no cancellation reaches (test suite)
        }
    }
}
#else
/// The test suite's fault hooks, inert: this build reads no `FERRY_TEST_*`
/// variable, so no environment can make a worker trap or hang on a message.
enum TestTrap {
    static let checkLimitSeconds: Double? = nil
    static func beforeSettling() async {}
    static let deadLetterHold = PartitionLeaveHold.inert
    @inline(__always) static func check(_ bytes: [UInt8]) {}
}
#endif
