import FerryCore
import FerryKafka
import Logging
import Synchronization
import FerryConcurrency

/// Commits the worker's offsets with their start records, one commit at a
/// time: callers that arrive while a commit is in flight share the next one
/// (group commit), which carries everything recorded before they asked. The
/// periodic commit of finished work and the crash-loop breaker's "this start
/// is recorded" both come through here, so commits never overtake each other.
///
/// In a rebalance the group coordinator holds a member's requests until every
/// member has rejoined (a broker answers one request per connection at a time,
/// and the JoinGroup waits), so commits stall or fail for the rebalance's
/// length. Starts must not wait that out: `commitStart` waits a short bound,
/// and not at all while the last commit failed, and the next commit that
/// Kafka takes carries the starts recorded meanwhile.
final class OffsetCommitter: Sendable {
    typealias Commit = @Sendable ([TopicPartitionOffset]) async throws -> Void
    private struct State {
        var waiters: [@Sendable (Bool) -> Void] = []
        var running = false
    }
    private let state = Mutex(State())
    /// Whether Kafka took the last commit (or nothing had been tried yet).
    private let takingCommits = Atomic<Bool>(true)
    private let kafkaCommit: Commit
    private let afterCommit: (@Sendable ([TopicPartitionOffset]) async -> Void)?
    private let tracker: OffsetTracker
    private let logger: Logger
    private let failureWarnings = WarningThrottle()

    convenience init(consumer: KafkaConsumer, tracker: OffsetTracker, logger: Logger) {
        self.init(tracker: tracker, logger: logger, afterCommit: { offsets in
            await StartRecordsProbe.shared.verify(offsets, consumer: consumer, logger: logger)
        }) { offsets in try await consumer.commit(offsets) }
    }

    /// `afterCommit` runs after each commit Kafka took, its waiters answered, before the next commit.
    init(tracker: OffsetTracker, logger: Logger, afterCommit: (@Sendable ([TopicPartitionOffset]) async -> Void)? = nil,
         commit: @escaping Commit) {
        kafkaCommit = commit
        self.afterCommit = afterCommit
        self.tracker = tracker
        self.logger = logger
    }

    /// Commits what changed since the last commit; true when Kafka took it
    /// (or nothing had changed), false when the commit failed (it is retried
    /// with the next one).
    func commit() async -> Bool {
        await withCheckedContinuation { continuation in
            enqueue { continuation.resume(returning: $0) }
        }
    }

    /// A start record's commit: true once Kafka has it. Waits at most `limit`,
    /// and not at all while Kafka is refusing or timing out commits (then only
    /// asks for one); false means the start is not in Kafka yet and the next
    /// commit Kafka takes carries it.
    func commitStart(waitingAtMost limit: Duration) async -> Bool {
        guard takingCommits.load(ordering: .relaxed) else {
            enqueue { _ in }
            return false
        }
        let answer = OnceValue<Bool>()
        enqueue { answer.deliver($0) }
        let timer = Task {
            try? await Task.sleep(for: limit)
            answer.deliver(false)
        }
        defer { timer.cancel() }
        let recorded = await answer.value
        // Not in Kafka within the bound: later starts stop waiting until a commit
        // gets through. Marked here, before this start returns, so the next one
        // sees it (marked by the timer, a preempted timer thread let the next
        // start wait out a whole rebalance). A commit that lands in between and
        // is overwritten costs one start that does not wait for its record.
        if !recorded { takingCommits.store(false, ordering: .relaxed) }
        return recorded
    }

    private func enqueue(_ waiter: @escaping @Sendable (Bool) -> Void) {
        let startRunner = state.withLock { s -> Bool in
            s.waiters.append(waiter)
            guard !s.running else { return false }
            s.running = true
            return true
        }
        // Detached: one caller's cancellation must not drop a commit others wait for.
        if startRunner { Task.detached { [self] in await run() } }
    }

    private func run() async {
        while true {
            let waiters = state.withLock { s -> [@Sendable (Bool) -> Void] in
                defer { s.waiters = [] }
                if s.waiters.isEmpty { s.running = false }
                return s.waiters
            }
            guard !waiters.isEmpty else { return }
            let offsets = tracker.takeCommits()
            var succeeded = true
            if !offsets.isEmpty {
                do {
                    try await kafkaCommit(offsets)
                } catch {
                    tracker.commitFailed(offsets)
                    failed(error)
                    succeeded = false
                }
            }
            takingCommits.store(succeeded, ordering: .relaxed)
            waiters.forEach { $0(succeeded) }
            if succeeded, !offsets.isEmpty { await afterCommit?(offsets) }
        }
    }

    /// Logs a failed commit, at most every 10 s with the count since the last
    /// line: a rebalance refuses every commit for its whole length.
    private func failed(_ error: any Error) {
        guard let count = failureWarnings.occurred() else { return }
        logger.warning("offset commit failed (will retry): \(error)\(count > 1 ? " (\(count) failed commits since the last warning)" : "")")
    }
}
