import FerryCore
import FerryTriggerKit
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
