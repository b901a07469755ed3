import FerryCore
import FerryKafka
import FerryTestSupport
@testable import FerryWorker
import Logging
import Synchronization
import Testing

/// Starts never wait out a rebalance: while Kafka holds commits, a start waits
/// for it once (a bound), then not at all until Kafka takes a commit again;
/// the starts recorded meanwhile ride on that commit.
@Suite struct OffsetCommitterTests {
    /// A stand-in for the group coordinator: commits hang while `holding`
    /// (as in a rebalance, which ends by itself after 40 s), and every commit
    /// that got through is kept.
    final class Coordinator: Sendable {
        let holding = Mutex(true)
        let taken = Mutex<[[TopicPartitionOffset]]>([])
        let rebalanceEnds = ContinuousClock.now + .seconds(40)

        func commit(_ offsets: [TopicPartitionOffset]) async throws {
            while holding.withLock({ $0 }) && ContinuousClock.now < rebalanceEnds { try await Task.sleep(for: .milliseconds(20)) }
            taken.withLock { $0.append(offsets) }
        }
    }

    let partition = TopicPartition(topic: "ferry.requests", partition: 0)

    func message(_ offset: Int64) -> KafkaMessage {
        KafkaMessage(topic: "ferry.requests", partition: 0, offset: offset, key: nil, value: [], headers: [])
    }

    /// Begins `offset` and counts its start, as the crash-loop breaker does before a message runs.
    func start(_ offset: Int64, on tracker: OffsetTracker) {
        #expect(tracker.begin(message(offset)))
        #expect(tracker.recordStart(of: message(offset)) == 1)
    }

    /// A committer of one assigned partition whose commits go to a fresh coordinator (holding them).
    func makeCommitter() -> (OffsetTracker, Coordinator, OffsetCommitter) {
        let tracker = OffsetTracker(watermark: OutboxWatermark(committed: { 0 }))
        tracker.assign([partition])
        tracker.seedStarts([:], for: partition)
        let coordinator = Coordinator()
        let committer = OffsetCommitter(tracker: tracker, logger: Logger(label: "test.committer")) {
            try await coordinator.commit($0)
        }
        return (tracker, coordinator, committer)
    }

    @Test func startsWaitOutAHeldCommitOnceThenNotAtAll() async {
        let (tracker, coordinator, committer) = makeCommitter()
        let clock = ContinuousClock()

        // Kafka holds commits: the first start waits the bound, then runs unrecorded in Kafka.
        start(0, on: tracker)
        var recorded = true
        let first = await clock.measure { recorded = await committer.commitStart(waitingAtMost: .seconds(2)) }
        #expect(!recorded)
        #expect(first >= .seconds(2))

        // The next ones do not wait at all (a bound of a minute would show).
        for offset in Int64(1)...20 {
            start(offset, on: tracker)
            let waited = await clock.measure { recorded = await committer.commitStart(waitingAtMost: .seconds(60)) }
            #expect(!recorded)
            #expect(waited < .seconds(30), "start \(offset) waited \(waited) for a commit Kafka holds")
        }

        // The rebalance ends: the held commit and the next carry every start recorded meanwhile.
        coordinator.holding.withLock { $0 = false }
        let caughtUp = await eventually(timeout: 30) {
            let last = coordinator.taken.withLock { $0.last?.first }
            return StartRecords.decode(last?.metadata).keys.sorted() == Array(0...20)
        }
        #expect(caughtUp, "commits after the rebalance: \(coordinator.taken.withLock { $0.map { $0.map(\.metadata) } })")

        // Kafka takes commits again: a start waits for its record once more, and has it.
        start(21, on: tracker)
        #expect(await committer.commitStart(waitingAtMost: .seconds(60)))
        let last = coordinator.taken.withLock { $0.last?.first }
        #expect(StartRecords.decode(last?.metadata)[21] == 1)
    }

    /// However the threads interleave, a start that timed out has marked Kafka
    /// as holding commits before it returns: the very next start does not wait.
    /// (CI once saw the mark set after the next start had begun waiting: that
    /// start then waited out the whole rebalance.) Many short trials at once, so
    /// the threads are busy and preempted; each trial's commits are held until
    /// it has its answer, so a start that waited would come back recorded.
    @Test func theStartAfterATimedOutOneNeverWaits() async {
        let trials = 400
        let waitedOut = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<trials {
                group.addTask {
                    let (tracker, coordinator, committer) = makeCommitter()
                    start(0, on: tracker)
                    let first = await committer.commitStart(waitingAtMost: .milliseconds(1))
                    start(1, on: tracker)
                    // Released after 5 s at the latest, so a start that waits comes back recorded.
                    let release = Task {
                        try? await Task.sleep(for: .seconds(5))
                        coordinator.holding.withLock { $0 = false }
                    }
                    let next = await committer.commitStart(waitingAtMost: .seconds(60))
                    release.cancel()
                    coordinator.holding.withLock { $0 = false }
                    return first || next
                }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(waitedOut == 0, "\(waitedOut) of \(trials) starts after a timed-out one waited for the held commit")
    }

    @Test func aHealthyCommitIsAwaited() async {
        let (tracker, coordinator, committer) = makeCommitter()
        coordinator.holding.withLock { $0 = false }
        for offset in Int64(0)..<50 {
            start(offset, on: tracker)
            #expect(await committer.commitStart(waitingAtMost: .seconds(60)))
            let last = coordinator.taken.withLock { $0.last?.first }
            #expect(StartRecords.decode(last?.metadata)[offset] == 1, "start \(offset) is in Kafka before it runs")
        }
    }
}
