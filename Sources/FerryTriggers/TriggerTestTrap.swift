import FerryCore
import FerryTriggerKit
import FerryKafka
import Foundation

#if FERRY_TEST_HOOKS
/// For the test suite only (the `TestHooks` trait; release builds have the
/// inert version below): with `FERRY_TEST_TRIGGER_TRAP_MARKER` set, a trigger
/// message whose bytes contain its value stops the process with `fatalError`
/// just before its handler would run, as a handler that traps would.
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
#else
/// The trigger fault hooks, inert: this build reads no `FERRY_TEST_*` variable.
enum TriggerTestTrap {
    @inline(__always) static func check(_ bytes: [UInt8]) {}
    static let failureRecordHold = PartitionLeaveHold.inert
}
#endif
