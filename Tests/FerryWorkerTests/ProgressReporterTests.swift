import FerryCore
import FerryEngine
import FerryKafka
import FerryTestSupport
@testable import FerryWorker
import Foundation
import Logging
import Synchronization
import Testing
import FerryConcurrency

/// Invariant: however the engine's threads interleave progress reports and
/// pauses, the statuses a transfer's reporter publishes reach Kafka in the
/// order the reporter decided them, so the last `paused` status gives the
/// bytes still kept. (Decided under separate locks and posted after them, a
/// pause's status and an aborted request's smaller count once reached Kafka
/// in the reverse order.)
///
/// Threads call `report` and `stateChanged` at random; the reporter's
/// `observe` hook, called where each decision is made, logs the calls in
/// decision order (each report carries a unique tag in `totalBytes`, so a
/// state change, which repeats the last report's tag, is told apart). A
/// sequential model of the reporter, fed that log, gives the statuses Kafka
/// must hold, in order.
@Suite struct ProgressReporterTests {
    enum Call: Equatable { case report(bytes: Int64, tag: Int64), paused, running }
    struct Shown: Equatable { var state: TransferStatus.State; var bytes: Int64?; var tag: Int64? }

    /// The calls in the order the reporter decided them, and the report tags seen.
    final class CallLog: Sendable {
        struct Seen { var calls: [Call] = []; var tags: Set<Int64> = [] }
        let seen = Mutex(Seen())
        let nextTag = Atomic<Int64>(0)
    }

    /// What the reporter publishes for `calls` (with an interval of 0, every running report goes out).
    static func model(_ calls: [Call]) -> [Shown] {
        var last = Shown(state: .running, bytes: 0, tag: nil), pausedAt: Int64?
        var out: [Shown] = []
        for call in calls {
            switch call {
            case .paused:
                pausedAt = last.bytes
                out.append(Shown(state: .paused, bytes: last.bytes, tag: last.tag))
            case .running:
                pausedAt = nil
                out.append(Shown(state: .running, bytes: last.bytes, tag: last.tag))
            case .report(let bytes, let tag):
                last = Shown(state: .running, bytes: bytes, tag: tag)
                if let at = pausedAt {
                    if bytes < at {
                        pausedAt = bytes
                        out.append(Shown(state: .paused, bytes: bytes, tag: tag))
                    }
                } else {
                    out.append(last)
                }
            }
        }
        return out
    }

    @Test(arguments: [7, 99, 2026])
    func statusesReachKafkaInTheOrderTheyWereDecided(seed: UInt64) async throws {
        let logger = Logger(label: "test.progress")
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
        let topics = Topics(prefix: "pr\(seed)")
        try cluster.createTopic(topics.status, partitions: 1)
        let kafka = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
        let producer = try KafkaProducer(configuration: kafka, logger: logger)
        let publisher = OutcomePublisher(producer: producer, topics: topics, logger: logger)

        let log = CallLog()
        let reporter = ProgressReporter(publisher: publisher, template: TransferStatus(id: "t-\(seed)", op: "upload", state: .running),
                                        interval: 0) { state, progress in
            log.seen.withLock { seen in
                // Every report has a tag; a state change before the first report shows none.
                if let tag = progress.totalBytes, seen.tags.insert(tag).inserted {
                    seen.calls.append(.report(bytes: progress.bytesTransferred, tag: tag))
                } else {
                    seen.calls.append(state == .paused ? .paused : .running)
                }
            }
        }
        // Four threads, each with its own seeded sequence: mostly reports (bytes that
        // grow, and sometimes fall back, as an aborted request's do), some pauses and resumes.
        let threads = 4, callsEach = 150
        await withTaskGroup(of: Void.self) { group in
            for thread in 0..<threads {
                group.addTask {
                    await BlockingPool.shared.run {
                        var random = SeededGenerator(seed: seed &* 31 &+ UInt64(thread))
                        for _ in 0..<callsEach {
                            switch Int.random(in: 0..<10, using: &random) {
                            case 0: reporter.stateChanged(.paused)
                            case 1: reporter.stateChanged(.running)
                            default:
                                let tag = log.nextTag.add(1, ordering: .relaxed).newValue
                                reporter.report(TransferProgress(bytesTransferred: Int64.random(in: 0...1 << 20, using: &random), totalBytes: tag))
                            }
                        }
                    }
                }
            }
        }
        let expected = Self.model(log.seen.withLock { $0.calls })
        #expect(log.seen.withLock { $0.calls.count } == threads * callsEach)

        // Read back, once every posted status is in Kafka.
        var published: [Shown] = []
        let complete = await eventually(timeout: 60) {
            let messages = (try? await KafkaConsumer.snapshot(topic: topics.status, configuration: kafka, timeout: 20, logger: logger)) ?? []
            published = messages.compactMap { try? JSONDecoder().decode(TransferStatus.self, from: Data($0.value)) }
                .map { Shown(state: $0.state, bytes: $0.bytesTransferred, tag: $0.totalBytes) }
            return published.count >= expected.count
        }
        #expect(complete, "\(published.count) of \(expected.count) statuses in Kafka")
        let firstDifference = zip(published, expected).enumerated().first { $0.element.0 != $0.element.1 }
        #expect(published == expected,
                "seed \(seed): \(published.count) published, \(expected.count) decided; first difference at \(firstDifference.map { "\($0.offset): \($0.element.0) vs \($0.element.1)" } ?? "the end")")
        #expect(expected.contains { $0.state == .paused } && expected.contains { $0.state == .running })
    }
}
