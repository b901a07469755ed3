import FerryKafka
import Logging
import Synchronization

/// Commits the worker's offsets with their start records, one commit at a
/// time: callers that arrive while a commit is in flight share the next one
/// (group commit), which carries everything recorded before they asked. The
/// periodic commit of finished work and the crash-loop breaker's "this start
/// is recorded" both come through here, so commits never overtake each other.
final class OffsetCommitter: Sendable {
    private struct State {
        var waiters: [CheckedContinuation<Bool, Never>] = []
        var running = false
    }
    private let state = Mutex(State())
    private let consumer: KafkaConsumer
    private let tracker: OffsetTracker
    private let logger: Logger

    init(consumer: KafkaConsumer, tracker: OffsetTracker, logger: Logger) {
        self.consumer = consumer
        self.tracker = tracker
        self.logger = logger
    }

    /// Commits what changed since the last commit; true when Kafka took it
    /// (or nothing had changed), false when the commit failed (it is retried
    /// with the next one).
    func commit() async -> Bool {
        await withCheckedContinuation { continuation in
            let startRunner = state.withLock { s -> Bool in
                s.waiters.append(continuation)
                guard !s.running else { return false }
                s.running = true
                return true
            }
            // Detached: one caller's cancellation must not drop a commit others wait for.
            if startRunner { Task.detached { [self] in await run() } }
        }
    }

    private func run() async {
        while true {
            let waiters = state.withLock { s -> [CheckedContinuation<Bool, Never>] in
                defer { s.waiters = [] }
                if s.waiters.isEmpty { s.running = false }
                return s.waiters
            }
            guard !waiters.isEmpty else { return }
            let offsets = tracker.takeCommits()
            var succeeded = true
            if !offsets.isEmpty {
                do {
                    try await consumer.commit(offsets)
                } catch {
                    tracker.commitFailed(offsets)
                    logger.warning("offset commit failed (will retry): \(error)")
                    succeeded = false
                }
            }
            waiters.forEach { $0.resume(returning: succeeded) }
        }
    }
}
