import Foundation
import Synchronization

/// For the test suite only: with the environment variable `name` set (seconds,
/// 0 < s ≤ 60), the first `hold` of the process waits until the message's
/// partition begins to leave (`revoked`), then 0.3 s more, or that long at
/// most, so that a test can move the partition while a dead letter is being
/// written. Unset, as in production, it does nothing.
public final class PartitionLeaveHold: Sendable {
    private let name: String
    private let seconds: Double?
    private let held = Atomic<Bool>(false)

    public init(environmentVariable name: String) {
        self.name = name
        seconds = ProcessInfo.processInfo.environment[name].flatMap(Double.init).flatMap { $0 > 0 && $0 <= 60 ? $0 : nil }
    }

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
