import FerryCore
@testable import FerryStore
import FerryTestSupport
import Foundation
import GRDB
import Synchronization
import Testing

/// Invariant the worker's commits rest on: `outboxCommittedSeq` is exactly the
/// highest outbox seq of a committed transaction, whichever path wrote it,
/// never one a rolled-back write took; and a read that begins after it was
/// read sees every row up to it.
@Suite struct OutboxHighWaterTests {
    struct Refused: Error {}
    final class Flag: Sendable {
        let raised = Atomic<Bool>(false)
        /// The reader has made its first check: the writers start after it, so the two overlap
        /// however late a loaded machine schedules the reader.
        let readerStarted = Atomic<Bool>(false)
    }

    func rows(_ count: Int, tag: String) -> [OutboxMessage] {
        (0..<count).map { OutboxMessage(topic: "t", key: Array("\(tag)-\($0)".utf8), value: Array("v".utf8)) }
    }

    /// What SQLite itself says: the highest seq AUTOINCREMENT handed out in a committed transaction.
    func sqliteSequence(_ store: WorkerStateStore) async throws -> Int64 {
        try await store.database.read { try Int64.fetchOne($0, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'outbox'") ?? 0 }
    }

    @Test(arguments: [7, 99, 2024] as [UInt64])
    func seededConcurrentWritesKeepTheHighWaterExact(seed: UInt64) async throws {
        var rng = SeededGenerator(seed: seed)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-highwater-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        var store = try WorkerStateStore(directory: dir)
        #expect(store.outboxCommittedSeq == 0)
        let stop = Flag()
        var kinds = [Int](repeating: 0, count: 5)

        for round in 0..<30 {
            // A reader beside the writers: nothing is deleted here, and rolled-back seqs are
            // handed out again, so a read that begins after the high water holds all of 1...it.
            stop.raised.store(false, ordering: .relaxed)
            stop.readerStarted.store(false, ordering: .relaxed)
            let reader = Task { [store, stop] () -> Int in
                var checks = 0
                while !stop.raised.load(ordering: .relaxed) {
                    let high = store.outboxCommittedSeq
                    let seen = try await store.database.read { try Int64.fetchOne($0, sql: "SELECT COUNT(*) FROM outbox WHERE seq <= ?", arguments: [high]) ?? 0 }
                    #expect(seen == high, "seed \(seed) round \(round): a read after high water \(high) saw \(seen) rows up to it")
                    checks += 1
                    stop.readerStarted.store(true, ordering: .relaxed)
                }
                return checks
            }
            let readerDeadline = ContinuousClock.now + .seconds(60)
            while !stop.readerStarted.load(ordering: .relaxed) && ContinuousClock.now < readerDeadline {
                try await Task.sleep(for: .milliseconds(1))
            }
            let plan = (0..<12).map { _ in (Int.random(in: 0..<5, using: &rng), Int.random(in: 0...4, using: &rng)) }
            for (kind, _) in plan { kinds[kind] += 1 }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, (kind, count)) in plan.enumerated() {
                    let tag = "\(round)-\(index)"
                    group.addTask { [store] in
                        switch kind {
                        case 0: // an outcome through the group commit
                            try await store.commitOutcome(rows(count, tag: tag))
                        case 1: // a write in the group commit that fails after its rows: its savepoint goes
                            try? await store.writes.write { db in
                                try WorkerStateStore.enqueue(rows(count, tag: tag), in: db)
                                throw Refused()
                            }
                        case 2: // a whole transaction rolled back, outside the group commit
                            try? await store.database.write { db in
                                try WorkerStateStore.enqueue(rows(count, tag: tag), in: db)
                                throw Refused()
                            }
                        case 3: // the expiry of a finished id writes its record outside the group commit
                            let status = TransferStatus(id: tag, op: "upload", state: .completed)
                            try await store.commitOutcome([], finished: status, streamOffset: 5)
                            try await store.pruneFinished(olderThan: -60) { _, _ in rows(1, tag: tag)[0] }
                        default: // a journal entry that opens with statuses
                            try await store.beginTransfer(id: tag, request: [], topic: "r", partition: 0, offset: 0, outbox: rows(count, tag: tag))
                        }
                    }
                }
                try await group.waitForAll()
            }
            stop.raised.store(true, ordering: .relaxed)
            #expect(try await reader.value > 0)
            let expected = try await sqliteSequence(store)
            #expect(store.outboxCommittedSeq == expected, "seed \(seed) round \(round)")
            let highestRow = try await store.database.read { try Int64.fetchOne($0, sql: "SELECT MAX(seq) FROM outbox") ?? 0 }
            #expect(expected == highestRow, "nothing is deleted here: the highest committed seq is a row")
            if round % 10 == 9 {
                // Reopened, as after a restart: the value is read back from SQLite.
                store = try WorkerStateStore(directory: dir)
                #expect(store.outboxCommittedSeq == expected)
            }
        }
        #expect(kinds.allSatisfy { $0 > 0 }, "seed \(seed): every kind of write ran (\(kinds))")
    }

    @Test func deliveredRowsLeaveTheHighWaterWhereItWas() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-highwater-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try WorkerStateStore(directory: dir)
        try await store.commitOutcome(rows(3, tag: "a"))
        let pending = try await store.pendingOutbox(limit: 10)
        #expect(pending.map(\.seq) == [1, 2, 3])
        try await store.removeFromOutbox(pending.map(\.seq))
        try await store.parkOutboxMessage(seq: 99, reason: "absent")
        #expect(store.outboxCommittedSeq == 3)
        // AUTOINCREMENT never hands a delivered row's number out again.
        try await store.commitOutcome(rows(1, tag: "b"))
        #expect(try await store.pendingOutbox(limit: 10).map(\.seq) == [4])
        #expect(store.outboxCommittedSeq == 4)
    }
}
