import Foundation
import Synchronization

/// A hold the test suite uses to move a partition while a dead letter or a
/// failure record is being written. With the `TestHooks` trait and the
/// environment variable it is made with set (seconds, 0 < s ≤ 60), the first
/// `hold` of the process waits until the message's partition begins to leave
/// (`revoked`), then 0.3 s more, or that long at most. Without the trait (a
/// release build) every hold is `inert` and reads no environment.
public final class PartitionLeaveHold: Sendable {
    private let name: String
    private let seconds: Double?
    private let held = Atomic<Bool>(false)

    /// A hold that never waits.
    public static let inert = PartitionLeaveHold(name: "", seconds: nil)

    private init(name: String, seconds: Double?) {
        self.name = name
        self.seconds = seconds
    }

#if FERRY_TEST_HOOKS
    public convenience init(environmentVariable name: String) {
        self.init(name: name, seconds: ProcessInfo.processInfo.environment[name].flatMap(Double.init).flatMap { $0 > 0 && $0 <= 60 ? $0 : nil })
    }
#endif

    /// `what` names the write held in the two lines it prints to standard error.
    public func hold(_ what: String, of message: KafkaMessage, revoked: () -> Bool) async {
        guard let seconds, !held.exchange(true, ordering: .relaxed) else { return }
        let place = "\(message.topic)/\(message.partition) offset \(message.offset)"
        FileHandle.standardError.write(Data("\(name): holding the \(what) of \(place)\n".utf8))
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !revoked() && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(50)) }
        if revoked() { try? await Task.sleep(for: .milliseconds(300)) }
        FileHandle.standardError.write(Data("\(name): released \(place) (\(revoked() ? "revoked" : "not revoked"))\n".utf8))
    }
}
