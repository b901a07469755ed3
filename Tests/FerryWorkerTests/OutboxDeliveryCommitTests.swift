import FerryCore
import FerryKafka
import FerryStore
import FerryTestSupport
@testable import FerryWorker
import Foundation
import Logging
import Testing

/// Invariant: an offset is committed only when every request before it in its
/// partition has its outcome in Kafka, not merely in the local outbox. A
/// worker that never comes back with its state directory then leaves no
/// committed request without its statuses.
@Suite struct OutboxDeliveryCommitTests {
    func message(_ partition: Int32, _ offset: Int64) -> KafkaMessage {
        KafkaMessage(topic: "ferry.requests", partition: partition, offset: offset, key: nil, value: [], headers: [])
    }


    @Test func aFinishedMessageWaitsForADrainRoundThatStartedAfterIt() {
        let p = TopicPartition(topic: "ferry.requests", partition: 0)
        let rounds = OutboxRounds()
        let tracker = OffsetTracker.owning([p], rounds: rounds)
        #expect(tracker.begin(message(0, 0)))
        #expect(tracker.begin(message(0, 1)))
        // A round is reading the outbox when the outcome lands: it may not have seen it.
        let early = rounds.start()
        tracker.finish(message(0, 0))
        rounds.settle(early)
        #expect(tracker.takeCommits().map(\.offset) == [0], "a round that started before the outcome proves nothing")
        let next = rounds.start()
        #expect(tracker.takeCommits().isEmpty, "the round has not delivered yet")
        #expect(tracker.deliveryTicket(on: [p]) == next)
        rounds.settle(next)
        #expect(tracker.takeCommits().map(\.offset) == [1])
        #expect(tracker.deliveryTicket(on: [p]) == nil)
        // A round that did not deliver everything (a failure, or a full batch) settles nothing.
        tracker.finish(message(0, 1))
        _ = rounds.start()
        #expect(tracker.takeCommits().isEmpty)
        #expect(tracker.revoke([p]).map(\.offset) == [1], "a revoke commits only the delivered prefix too")
    }

    /// A model of the outbox beside the real tracker: rows are written when a
    /// message finishes, a drain round reads at most `limit` of them and
    /// delivers each or not, and settles only as the drainer does. Every
    /// commit is checked against what the model says reached Kafka.
    @Test(arguments: [1, 2, 3, 42, 1000, 65537] as [UInt64])
    func seededInterleavingsNeverCommitAnUndeliveredOutcome(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        let partitions = (0..<3).map { TopicPartition(topic: "ferry.requests", partition: Int32($0)) }
        let rounds = OutboxRounds()
        let tracker = OffsetTracker.owning(partitions, rounds: rounds)
        let limit = 16
        var nextOffset = [Int64](repeating: 0, count: partitions.count)
        var inFlight: [(Int32, Int64)] = []
        var outbox: [(Int32, Int64)] = []
        var delivered = Set<[Int64]>()
        var abandoned = [Int64?](repeating: nil, count: partitions.count)
        var committed = [Int64](repeating: 0, count: partitions.count)
        var openRound: (number: Int64, read: [(Int32, Int64)])?
        var advances = 0

        func check(_ commits: [TopicPartitionOffset], _ step: Int) {
            for commit in commits {
                let p = Int(commit.partition)
                for offset in 0..<commit.offset where !delivered.contains([Int64(p), offset]) {
                    Issue.record("seed \(seed) step \(step): partition \(p) committed \(commit.offset) with offset \(offset) not in Kafka")
                    return
                }
                #expect(commit.offset >= committed[p], "seed \(seed) step \(step): commit went back")
                if commit.offset > committed[p] { advances += 1 }
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
            case 250..<500 where !inFlight.isEmpty:
                let (p, offset) = inFlight.remove(at: Int.random(in: 0..<inFlight.count, using: &rng))
                outbox.append((p, offset))
                tracker.finish(message(p, offset))
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
                openRound = (rounds.start(), Array(outbox.prefix(limit)))
            case 700..<870:
                guard let round = openRound else { continue }
                openRound = nil
                var all = true
                for row in round.read {
                    guard Int.random(in: 0..<100, using: &rng) < 97 else { all = false; continue }
                    delivered.insert([Int64(row.0), row.1])
                    outbox.removeAll { $0 == row }
                }
                if all && round.read.count < limit { rounds.settle(round.number) }
            case 870..<1000:
                let commits = tracker.takeCommits()
                check(commits, step)
                if Int.random(in: 0..<8, using: &rng) == 0 { tracker.commitFailed(commits) }
            default:
                continue
            }
        }

        #expect(advances > 50, "seed \(seed): commits moved only \(advances) times while work ran")

        // Everything finishes and the outbox empties: the commit reaches the end
        // (or the first message given back).
        for (p, offset) in inFlight { outbox.append((p, offset)); tracker.finish(message(p, offset)) }
        for row in outbox { delivered.insert([Int64(row.0), row.1]) }
        rounds.settle(rounds.start())
        check(tracker.takeCommits(), 4000)
        for p in partitions.indices where nextOffset[p] > 0 {
            #expect(committed[p] == (abandoned[p] ?? nextOffset[p]), "seed \(seed): partition \(p)")
        }
    }

    /// Against librdkafka's mock cluster: while the outbox cannot reach Kafka
    /// (a producer whose broker does not answer) the finished message is
    /// neither committed nor revoked past; one drain to the cluster later, it is.
    @Test func anOutboxThatCannotReachKafkaHoldsTheCommitBack() async throws {
        let logger = Logger(label: "test.outbox-commit")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-outbox-commit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
        try cluster.createTopic("t.status", partitions: 1)
        let state = try WorkerStateStore(directory: directory)
        let rounds = OutboxRounds()
        func drainer(to bootstrap: String) throws -> OutboxDrainer {
            let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: bootstrap), logger: logger)
            return OutboxDrainer(state: state, producer: producer, deadLetterTopic: "t.requests.dlq", rounds: rounds, logger: logger)
        }
        // A port nothing listens on: every delivery times out.
        let unreachable = try drainer(to: "127.0.0.1:\(TestPaths.freePort())")
        let reachable = try drainer(to: cluster.bootstrapServers)
        let p = TopicPartition(topic: "ferry.requests", partition: 0)
        let tracker = OffsetTracker.owning([p], rounds: rounds)

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
        #expect(tracker.deliveryTicket(on: [p]) != nil)
        #expect(tracker.revoke([p]).map(\.offset) == [1], "nor by a revoke")
        // The partition comes back and the request runs again; its first outcome is still queued.
        tracker.assign([p])
        tracker.seedStarts([:], for: p)
        #expect(tracker.begin(message(0, 1)))
        tracker.finish(message(0, 1))
        #expect(await reachable.drain(within: 30) == 0)
        #expect(tracker.deliveryTicket(on: [p]) == nil)
        #expect(tracker.takeCommits().map(\.offset) == [2])
        let statuses = try await KafkaConsumer.snapshot(topic: "t.status", configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers),
                                                        timeout: 20, logger: logger)
        #expect(statuses.map(\.keyString) == ["a", "b"])
    }
}

extension OffsetTracker {
    /// A tracker that owns `partitions`, their earlier owners' start records read (none).
    static func owning(_ partitions: [TopicPartition], rounds: OutboxRounds) -> OffsetTracker {
        let tracker = OffsetTracker(rounds: rounds)
        tracker.assign(partitions)
        for p in partitions { tracker.seedStarts([:], for: p) }
        return tracker
    }
}
