import FerryKafka
import Foundation

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

    /// `FERRY_TEST_TRIGGER_QUARANTINE_HOLD`: a worker's first `WorkerCrashed` record waits for its partition to leave.
    static let failureRecordHold = PartitionLeaveHold(environmentVariable: "FERRY_TEST_TRIGGER_QUARANTINE_HOLD")
}
