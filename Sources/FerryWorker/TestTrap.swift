import FerryKafka
import Foundation
import Synchronization

/// For the test suite only: faults a test can switch on to prove that a
/// message crashing or wedging the worker ends as one `PoisonMessage` dead
/// letter. With `FERRY_TEST_TRAP_MARKER` set, a request whose bytes contain
/// its value stops the process with `fatalError`; with
/// `FERRY_TEST_HANG_MARKER`, such a request blocks its thread for good (a
/// loop in synchronous code), and `FERRY_TEST_CHECK_LIMIT_SECONDS` shortens
/// `CheckWatchdog`'s limit. `FERRY_TEST_SETTLE_DELAY_MS` waits that long
/// before a message's start record is settled after its outcome, widening the
/// window in which a record settled too late would be committed with the next
/// suspect's start. Unset (as in production) they do nothing.
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

    private static let deadLetterHold: Double? = environment["FERRY_TEST_DEAD_LETTER_HOLD"].flatMap(Double.init)
        .flatMap { $0 > 0 && $0 <= 60 ? $0 : nil }
    private static let held = Atomic<Bool>(false)

    /// With `FERRY_TEST_DEAD_LETTER_HOLD` (seconds) set, the first
    /// `PoisonMessage` dead letter of the process waits until its partition
    /// begins to leave (`revoked`), then 0.3 s more, or for that many seconds
    /// at most: a test moves the partition meanwhile.
    static func holdDeadLetter(of message: KafkaMessage, revoked: () -> Bool) async {
        guard let deadLetterHold, !held.exchange(true, ordering: .relaxed) else { return }
        FileHandle.standardError.write(Data("FERRY_TEST_DEAD_LETTER_HOLD: holding the dead letter of \(message.topic)/\(message.partition) offset \(message.offset)\n".utf8))
        let deadline = ContinuousClock.now + .seconds(deadLetterHold)
        while !revoked() && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(50)) }
        if revoked() { try? await Task.sleep(for: .milliseconds(300)) }
        FileHandle.standardError.write(Data("FERRY_TEST_DEAD_LETTER_HOLD: released \(message.topic)/\(message.partition) offset \(message.offset) (\(revoked() ? "revoked" : "not revoked"))\n".utf8))
    }

    static func check(_ bytes: [UInt8]) {
        if let marker, bytes.contains(marker) {
            fatalError("FERRY_TEST_TRAP_MARKER matched: trapping on purpose (test suite)")
        }
        if let hangMarker, bytes.contains(hangMarker) {
            while true { sleep(3600) }  // stuck on purpose, where no cancellation reaches (test suite)
        }
    }
}
