import FerryKafka
import Foundation
import Synchronization

/// Why a message was not invoked: it was being handled each of the last
/// `starts` times a worker stopped (`LaneStarts`). Its failure record carries
/// condition `WorkerCrashed` and this text.
struct WorkerCrashed: Error, CustomStringConvertible {
    var starts: Int
    var description: String {
        "the worker stopped \(starts) times while this was being handled (a trap or abort in the handler, or the process killed); not invoked again"
    }
}

/// For the test suite only: with `FERRY_TEST_TRIGGER_TRAP_MARKER` set, a
/// trigger message whose bytes contain its value stops the process with
/// `fatalError` just before its handler would run, as a handler that traps
/// would. Unset (as in production) it does nothing.
enum TriggerTestTrap {
    private static let marker: [UInt8]? = ProcessInfo.processInfo.environment["FERRY_TEST_TRIGGER_TRAP_MARKER"]
        .flatMap { $0.isEmpty ? nil : Array($0.utf8) }

    static func check(_ bytes: [UInt8]) {
        if let marker, bytes.contains(marker) {
            fatalError("FERRY_TEST_TRIGGER_TRAP_MARKER matched: trapping on purpose (test suite)")
        }
    }

    private static let hold: Double? = ProcessInfo.processInfo.environment["FERRY_TEST_TRIGGER_QUARANTINE_HOLD"]
        .flatMap(Double.init).flatMap { $0 > 0 && $0 <= 60 ? $0 : nil }
    private static let held = Atomic<Bool>(false)

    /// With `FERRY_TEST_TRIGGER_QUARANTINE_HOLD` (seconds) set, the first
    /// `WorkerCrashed` failure record of the process waits before it is
    /// written until its partition begins to leave (`revoked`), then 0.3 s
    /// more, or for that many seconds at most: a test moves the partition
    /// meanwhile. Unset it does nothing.
    static func holdFailureRecord(of message: KafkaMessage, revoked: () -> Bool) async {
        guard let hold, !held.exchange(true, ordering: .relaxed) else { return }
        FileHandle.standardError.write(Data("FERRY_TEST_TRIGGER_QUARANTINE_HOLD: holding the failure record of \(message.topic)/\(message.partition) offset \(message.offset)\n".utf8))
        let deadline = ContinuousClock.now + .seconds(hold)
        while !revoked() && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(50)) }
        if revoked() { try? await Task.sleep(for: .milliseconds(300)) }
        FileHandle.standardError.write(Data("FERRY_TEST_TRIGGER_QUARANTINE_HOLD: released \(message.topic)/\(message.partition) offset \(message.offset) (\(revoked() ? "revoked" : "not revoked"))\n".utf8))
    }
}
