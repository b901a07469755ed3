import FerryCore
import FerryKafka
import FerryStore
import FerryTestSupport
@testable import FerryWorker
import Foundation
import Logging
import Synchronization
import Testing

/// Invariant: an offset is committed only when every request before it in its
/// partition has its outcome in Kafka, not merely in the local outbox. A
/// worker that never comes back with its state directory then leaves no
/// committed request without its statuses.
@Suite struct OutboxDeliveryCommitTests {
    func message(_ partition: Int32, _ offset: Int64) -> KafkaMessage {
        KafkaMessage(topic: "ferry.requests", partition: partition, offset: offset, key: nil, value: [], headers: [])
    }


    /// A worker state store in a fresh directory (the caller removes it) and a
    /// one-broker mock cluster with a `t.status` topic for its outbox to drain to.
    func outboxBeside(_ label: String) throws -> (Logger, EmbeddedKafkaCluster, WorkerStateStore, URL) {
        let logger = Logger(label: "test.\(label)")
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
        try cluster.createTopic("t.status", partitions: 1)
        let directory = try TestPaths.temporaryDirectory(label)
        return (logger, cluster, try WorkerStateStore(directory: directory), directory)
    }

    @Test func aFinishedMessageWaitsUntilTheOutboxDeliveredUpToItsMark() {
        let p = TopicPartition(topic: "ferry.requests", partition: 0)
        let outbox = SeqCounter()
        let watermark = OutboxWatermark(committed: { outbox.current })
        let tracker = OffsetTracker.owning([p], watermark: watermark)
        #expect(tracker.begin(message(0, 0)))
        #expect(tracker.begin(message(0, 1)))
        // A round reads the outbox (empty) just before the outcome lands: it proves nothing.
        let before = watermark.mark()
        let row = outbox.next()
        tracker.finish(message(0, 0))
        watermark.roundDelivered(rows: 0, last: nil, limit: 16, committedBefore: before)
        #expect(tracker.takeCommits().map(\.offset) == [0], "a round that read before the outcome proves nothing")
        #expect(tracker.deliveryMark(on: [p]) == row)
        // A full batch that ends before the row leaves it waiting; one that reaches it delivers it.
        let later = outbox.next()
        watermark.roundDelivered(rows: 16, last: row - 1, limit: 16, committedBefore: later)
        #expect(tracker.takeCommits().isEmpty)
        watermark.roundDelivered(rows: 16, last: row, limit: 16, committedBefore: later)
        #expect(tracker.takeCommits().map(\.offset) == [1])
        #expect(tracker.deliveryMark(on: [p]) == nil)
        // The second outcome's mark covers the row written after the first one's.
        _ = outbox.next()
        tracker.finish(message(0, 1))
        #expect(tracker.deliveryMark(on: [p]) == outbox.current)
        watermark.roundDelivered(rows: 16, last: later, limit: 16, committedBefore: later)
        #expect(tracker.takeCommits().isEmpty)
        #expect(tracker.revoke([p]).map(\.offset) == [1], "a revoke commits only the delivered prefix too")
    }

    /// A model of the outbox beside the real tracker and watermark: rows are
    /// written when a message finishes and in bursts of others' rows, a drain
    /// round reads the oldest `limit` rows, delivers each or not, and settles
    /// through `roundDelivered` as the drainer does. Every commit is checked
    /// against what the model says reached Kafka, and commits must keep moving
    /// while the outbox holds more than a batch.
    @Test(arguments: [1, 2, 3, 42, 1000, 65537] as [UInt64])
    func seededInterleavingsNeverCommitAnUndeliveredOutcome(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        let partitions = (0..<3).map { TopicPartition(topic: "ferry.requests", partition: Int32($0)) }
        let seqs = SeqCounter()
        let watermark = OutboxWatermark(committed: { seqs.current })
        let tracker = OffsetTracker.owning(partitions, watermark: watermark)
        let limit = 16
        var nextOffset = [Int64](repeating: 0, count: partitions.count)
        var inFlight: [(Int32, Int64)] = []
        /// Rows waiting, oldest first: the seq, and the message whose outcome it carries (if any).
        var outbox: [(seq: Int64, owner: [Int64]?)] = []
        var delivered = Set<[Int64]>()
        var abandoned = [Int64?](repeating: nil, count: partitions.count)
        var committed = [Int64](repeating: 0, count: partitions.count)
        var openRound: (committedBefore: Int64, read: [(seq: Int64, owner: [Int64]?)])?
        var advances = 0
        var advancesBehindABacklog = 0

        func write(_ owner: [Int64]?) { outbox.append((seqs.next(), owner)) }
        func check(_ commits: [TopicPartitionOffset], _ step: Int) {
            for commit in commits {
                let p = Int(commit.partition)
                for offset in 0..<commit.offset where !delivered.contains([Int64(p), offset]) {
                    Issue.record("seed \(seed) step \(step): partition \(p) committed \(commit.offset) with offset \(offset) not in Kafka")
                    return
                }
                #expect(commit.offset >= committed[p], "seed \(seed) step \(step): commit went back")
                if commit.offset > committed[p] {
                    advances += 1
                    if outbox.count > limit { advancesBehindABacklog += 1 }
                }
                committed[p] = commit.offset
            }
        }

        for step in 0..<4000 {
            switch Int.random(in: 0..<1000, using: &rng) {
            case 0..<250:
                let p = Int.random(in: 0..<partitions.count, using: &rng)
                #expect(tracker.begin(message(Int32(p), nextOffset[p])))
                inFlight.append((Int32(p), nextOffset[p]))
                nextOffset[p] += 1
            case 250..<480 where !inFlight.isEmpty:
                let (p, offset) = inFlight.remove(at: Int.random(in: 0..<inFlight.count, using: &rng))
                write([Int64(p), offset])
                tracker.finish(message(p, offset))
            case 480..<500:
                // Others' rows (accepted statuses, item records): a burst may outgrow a batch.
                for _ in 0..<Int.random(in: 1...40, using: &rng) { write(nil) }
            case 500..<502 where !inFlight.isEmpty:
                let (p, offset) = inFlight.remove(at: Int.random(in: 0..<inFlight.count, using: &rng))
                abandoned[Int(p)] = min(abandoned[Int(p)] ?? offset, offset)
                tracker.abandon(message(p, offset))
            case 502..<512:
                // A rebalance gives a partition held back by an abandoned message to a
                // new owner (here: this worker again), which reads from the commit.
                let p = Int.random(in: 0..<partitions.count, using: &rng)
                guard abandoned[p] != nil else { continue }
                for (q, offset) in inFlight where Int(q) == p { tracker.abandon(message(q, offset)) }
                inFlight.removeAll { Int($0.0) == p }
                check(tracker.revoke([partitions[p]]), step)
                tracker.assign([partitions[p]])
                tracker.seedStarts([:], for: partitions[p])
                nextOffset[p] = committed[p]
                abandoned[p] = nil
            case 512..<700 where openRound == nil:
                // The drainer reads the high water, then (maybe after another write) the oldest rows.
                let committedBefore = watermark.mark()
                if Bool.random(using: &rng) { write(nil) }
                openRound = (committedBefore, Array(outbox.prefix(limit)))
            case 700..<870:
                guard let round = openRound else { continue }
                openRound = nil
                var all = true
                for row in round.read {
                    guard Int.random(in: 0..<100, using: &rng) < 97 else { all = false; continue }
                    if let owner = row.owner { delivered.insert(owner) }
                    outbox.removeAll { $0.seq == row.seq }
                }
                if all {
                    watermark.roundDelivered(rows: round.read.count, last: round.read.last?.seq, limit: limit,
                                             committedBefore: round.committedBefore)
                }
            case 870..<1000:
                let commits = tracker.takeCommits()
                check(commits, step)
                if Int.random(in: 0..<8, using: &rng) == 0 { tracker.commitFailed(commits) }
            default:
                continue
            }
        }

        #expect(advances > 50, "seed \(seed): commits moved only \(advances) times while work ran")
        #expect(advancesBehindABacklog > 5, "seed \(seed): commits moved \(advancesBehindABacklog) times while the outbox held more than a batch")

        // Everything finishes and the outbox drains, a batch per round: the commit
        // reaches the end (or the first message given back).
        for (p, offset) in inFlight { write([Int64(p), offset]); tracker.finish(message(p, offset)) }
        while true {
            let committedBefore = watermark.mark()
            let read = Array(outbox.prefix(limit))
            for row in read { if let owner = row.owner { delivered.insert(owner) } }
            outbox.removeFirst(read.count)
            watermark.roundDelivered(rows: read.count, last: read.last?.seq, limit: limit, committedBefore: committedBefore)
            if read.isEmpty { break }
        }
        check(tracker.takeCommits(), 4000)
        for p in partitions.indices where nextOffset[p] > 0 {
            #expect(committed[p] == (abandoned[p] ?? nextOffset[p]), "seed \(seed): partition \(p)")
        }
    }

    /// The real drainer, store and mock cluster: with more than a batch waiting
    /// in the outbox, the round that delivers a request's rows makes its offset
    /// committable while later rows still wait.
    @Test func aBacklogLongerThanABatchDoesNotHoldBackDeliveredOutcomes() async throws {
        let (logger, cluster, state, directory) = try outboxBeside("outbox-backlog")
        defer { try? FileManager.default.removeItem(at: directory) }
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), logger: logger)
        let drainer = OutboxDrainer(state: state, producer: producer, deadLetterTopic: "t.requests.dlq", logger: logger)
        let p = TopicPartition(topic: "ferry.requests", partition: 0)
        let tracker = OffsetTracker.owning([p], watermark: drainer.watermark)
        func status(_ key: String) -> OutboxMessage { OutboxMessage(topic: "t.status", key: Array(key.utf8), value: Array("{}".utf8)) }

        #expect(tracker.begin(message(0, 0)))
        #expect(tracker.begin(message(0, 1)))
        try await state.commitOutcome([status("first")])
        tracker.finish(message(0, 0))
        // Two and a half batches of others' rows behind it, then the second outcome.
        try await state.commitOutcome((0..<(OutboxDrainer.batchLimit * 5 / 2)).map { status("other-\($0)") })
        try await state.commitOutcome([status("second")])
        tracker.finish(message(0, 1))

        #expect(await drainer.drainOnce() == .progress)
        #expect(try await state.outboxDepth() == OutboxDrainer.batchLimit * 3 / 2 + 2)
        #expect(tracker.takeCommits().map(\.offset) == [1], "the first outcome is in Kafka; the rest of the outbox is not its concern")
        #expect(await drainer.drainOnce() == .progress)
        #expect(tracker.takeCommits().isEmpty, "the second outcome is still waiting")
        #expect(await drainer.drainOnce() == .progress)
        #expect(try await state.outboxDepth() == 0)
        #expect(tracker.takeCommits().map(\.offset) == [2])
    }

    /// Against librdkafka's mock cluster: while the outbox cannot reach Kafka
    /// (a producer whose broker does not answer) the finished message is
    /// neither committed nor revoked past; one drain to the cluster later, it is.
    @Test func anOutboxThatCannotReachKafkaHoldsTheCommitBack() async throws {
        let (logger, cluster, state, directory) = try outboxBeside("outbox-commit")
        defer { try? FileManager.default.removeItem(at: directory) }
        let watermark = OutboxWatermark(state: state)
        func drainer(to bootstrap: String) throws -> OutboxDrainer {
            let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: bootstrap), logger: logger)
            return OutboxDrainer(state: state, producer: producer, deadLetterTopic: "t.requests.dlq", watermark: watermark, logger: logger)
        }
        // A port nothing listens on: every delivery times out.
        let unreachable = try drainer(to: "127.0.0.1:\(TestPaths.freePort())")
        let reachable = try drainer(to: cluster.bootstrapServers)
        let p = TopicPartition(topic: "ferry.requests", partition: 0)
        let tracker = OffsetTracker.owning([p], watermark: watermark)

        #expect(tracker.begin(message(0, 0)))
        try await state.commitOutcome([OutboxMessage(topic: "t.status", key: Array("a".utf8), value: Array("{}".utf8))])
        tracker.finish(message(0, 0))
        #expect(await reachable.drain(within: 30) == 0)
        #expect(tracker.takeCommits().map(\.offset) == [1])

        #expect(tracker.begin(message(0, 1)))
        try await state.commitOutcome([OutboxMessage(topic: "t.status", key: Array("b".utf8), value: Array("{}".utf8))])
        tracker.finish(message(0, 1))
        #expect(await unreachable.drain(within: 3) == 1, "Kafka is out of reach: the outcome stays in the outbox")
        #expect(tracker.takeCommits().isEmpty, "its offset is not committed while its status is only local")
        #expect(tracker.deliveryMark(on: [p]) != nil)
        #expect(tracker.revoke([p]).map(\.offset) == [1], "nor by a revoke")
        // The partition comes back and the request runs again; its first outcome is still queued.
        tracker.assign([p])
        tracker.seedStarts([:], for: p)
        #expect(tracker.begin(message(0, 1)))
        tracker.finish(message(0, 1))
        #expect(await reachable.drain(within: 30) == 0)
        #expect(tracker.deliveryMark(on: [p]) == nil)
        #expect(tracker.takeCommits().map(\.offset) == [2])
        let statuses = try await KafkaConsumer.snapshot(topic: "t.status", configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers),
                                                        timeout: 20, logger: logger)
        #expect(statuses.map(\.keyString) == ["a", "b"])
    }
}

extension OffsetTracker {
    /// A tracker that owns `partitions`, their earlier owners' start records read (none).
    static func owning(_ partitions: [TopicPartition], watermark: OutboxWatermark) -> OffsetTracker {
        let tracker = OffsetTracker(watermark: watermark)
        tracker.assign(partitions)
        for p in partitions { tracker.seedStarts([:], for: p) }
        return tracker
    }
}

/// Outbox seqs handed out in commit order, as AUTOINCREMENT does.
final class SeqCounter: Sendable {
    private let value = Atomic<Int64>(0)
    func next() -> Int64 { value.add(1, ordering: .relaxed).newValue }
    var current: Int64 { value.load(ordering: .relaxed) }
}

/// An outbox for tracker tests that do not model it: every finished message
/// wrote one row just before it finished (its mark numbers it), and
/// `deliverAll()` delivers every row written so far.
final class RowPerFinishOutbox: Sendable {
    private let seqs = SeqCounter()
    let watermark: OutboxWatermark

    init() {
        watermark = OutboxWatermark(committed: { [seqs] in seqs.next() })
    }

    func deliverAll() { watermark.settle(through: seqs.current) }
}
