import FerryCore
import FerryStore
import FerryTestSupport
import Foundation
import Testing

@Suite struct WorkerStateStoreTests {
    func directory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("ferry-store-\(UUID().uuidString)")
    }

    @Test func finishedStatusesSurviveReopening() async throws {
        let dir = directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let status = TransferStatus(id: "t-1", op: "upload", state: .completed, bytesTransferred: 3, totalBytes: 3,
                                    object: .init(bucket: "b", key: "public/k", size: 3, eTag: "\"e\""))
        do {
            let store = try WorkerStateStore(directory: dir)
            #expect(try await store.finishedStatus(id: "t-1") == nil)
            try await store.recordFinished(status)
            // The first terminal status stays.
            try await store.recordFinished(TransferStatus(id: "t-1", op: "upload", state: .failed))
        }
        let reopened = try WorkerStateStore(directory: dir)
        #expect(try await reopened.finishedStatus(id: "t-1") == status)
        // WAL mode, as the design asks.
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("ferry.sqlite-wal").path))
    }

    /// Many lookups at once (a worker takes up to 4 × --max-transfers requests):
    /// each gets its own id's answer, whether or not it finished, with repeated
    /// ids, and racing the writes that record them.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func concurrentLookupsEachGetTheirOwnAnswer(seed: UInt64) async throws {
        let dir = directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try WorkerStateStore(directory: dir)
        var rng = SeededGenerator(seed: seed)
        let ids = (0..<1200).map { _ in "t-\(rng.next() % 900)" }  // repeats on purpose
        let finished = Set(ids.filter { _ in rng.next() % 3 == 0 })
        for id in finished { try await store.recordFinished(TransferStatus(id: id, op: "upload", state: .completed)) }
        // Recorded while the lookups run: seen or not, never someone else's.
        let late = (0..<100).map { "late-\($0)" }
        try await withThrowingTaskGroup(of: (String, TransferStatus?).self) { group in
            for id in ids + late { group.addTask { (id, try await store.finishedStatus(id: id)) } }
            group.addTask {
                for id in late { try await store.recordFinished(TransferStatus(id: id, op: "delete", state: .failed)) }
                return ("", nil)
            }
            for try await (id, status) in group where !id.isEmpty {
                if let status {
                    #expect(status.id == id, "seed \(seed)")
                    #expect(finished.contains(id) || id.hasPrefix("late-"), "seed \(seed): \(id) was never finished")
                } else {
                    #expect(!finished.contains(id), "seed \(seed): finished \(id) not found")
                }
            }
        }
        // After the writes, every one is found.
        for id in late { #expect(try await store.finishedStatus(id: id)?.state == .failed) }
    }

    @Test func pruningForgetsOldIds() async throws {
        let dir = directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try WorkerStateStore(directory: dir)
        try await store.recordFinished(TransferStatus(id: "old", op: "delete", state: .completed))
        #expect(try await store.pruneFinished(olderThan: 3600) == 0)
        #expect(try await store.pruneFinished(olderThan: -1) == 1)
        #expect(try await store.finishedStatus(id: "old") == nil)
    }
}

/// The journal and the outbox: what survives a kill -9 between two writes.
@Suite struct JournalAndOutboxTests {
    func directory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("ferry-store-\(UUID().uuidString)")
    }

    @Test func anOutcomeIsRecordedAtomicallyAndTheOutboxDrainsInOrder() async throws {
        let dir = directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let status = TransferStatus(id: "t-9", op: "upload", state: .completed)
        do {
            let store = try WorkerStateStore(directory: dir)
            try await store.beginTransfer(id: "t-9", request: Array("{}".utf8), topic: "ferry.requests", partition: 2, offset: 41)
            #expect(try await store.transfersInFlight().map(\.offset) == [41])
            try await store.partDownloaded(transferId: "t-9", eTag: "\"e\"", partSize: 8, partNumber: 3)
            try await store.commitOutcome([
                OutboxMessage(topic: "ferry.events", key: Array("b/k".utf8), value: Array("event".utf8)),
                OutboxMessage(topic: "ferry.status", key: Array("t-9".utf8), value: Array("status".utf8),
                              headers: [.init("ferry-error-code", "X")]),
            ], finished: status, endingTransfer: "t-9")
        }
        // Reopened, as after a crash: the outcome is all there, the journal entry gone.
        let store = try WorkerStateStore(directory: dir)
        #expect(try await store.transfersInFlight().isEmpty)
        #expect(try await store.downloadedParts(transferId: "t-9", eTag: "\"e\"", partSize: 8).isEmpty)
        #expect(try await store.finishedStatus(id: "t-9") == status)
        let pending = try await store.pendingOutbox(limit: 10)
        #expect(pending.map { String(decoding: $0.message.value, as: UTF8.self) } == ["event", "status"])
        #expect(pending[1].message.headers == [.init("ferry-error-code", "X")])
        try await store.removeFromOutbox([pending[0].seq])
        #expect(try await store.outboxDepth() == 1)
        #expect(try await store.pendingOutbox(limit: 10).first?.message.topic == "ferry.status")
    }

    @Test func uploadsAndPartsAreJournaledUntilTheyEnd() async throws {
        let dir = directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try WorkerStateStore(directory: dir)
        try await store.uploadStarted(transferId: "t-1", bucket: "b", key: "k", uploadId: "u-1")
        try await store.partUploaded(uploadId: "u-1", part: .init(partNumber: 2, eTag: "\"2\"", size: 5, checksum: "c", checksumAlgorithm: "CRC32C"))
        try await store.partUploaded(uploadId: "u-1", part: .init(partNumber: 1, eTag: "\"1\"", size: 5, checksum: nil, checksumAlgorithm: nil))
        let open = try #require(try await store.openUpload(transferId: "t-1", bucket: "b", key: "k"))
        #expect(open.parts.map(\.partNumber) == [1, 2])
        #expect(open.parts[1].checksumAlgorithm == "CRC32C")
        #expect(try await store.openUpload(transferId: "t-1", bucket: "b", key: "other") == nil)
        #expect(try await store.openUploads(createdBefore: Date().addingTimeInterval(1)).map(\.uploadId) == ["u-1"])
        #expect(try await store.openUploads(createdBefore: Date().addingTimeInterval(-60)).isEmpty)
        try await store.uploadEnded(uploadId: "u-1")
        #expect(try await store.openUpload(transferId: "t-1", bucket: "b", key: "k") == nil)

        // Downloaded parts count only for the ETag and part size they were written with.
        try await store.partDownloaded(transferId: "d", eTag: "\"a\"", partSize: 8, partNumber: 1)
        try await store.partDownloaded(transferId: "d", eTag: "\"a\"", partSize: 8, partNumber: 2)
        #expect(try await store.downloadedParts(transferId: "d", eTag: "\"a\"", partSize: 8) == [1, 2])
        #expect(try await store.downloadedParts(transferId: "d", eTag: "\"b\"", partSize: 8).isEmpty)
        try await store.partDownloaded(transferId: "d", eTag: "\"b\"", partSize: 8, partNumber: 1)
        #expect(try await store.downloadedParts(transferId: "d", eTag: "\"a\"", partSize: 8).isEmpty)
    }

    /// A state file that is not a database, or is damaged, is refused with its
    /// path and what to do, never a bare SQLite message: random bytes, a
    /// database with pages overwritten or cut short (seeded; `FERRY_FUZZ_SEED`
    /// replays), a directory where the file should be. Where the damage is
    /// in pages opening does not read, the store opens and serves its ids.
    @Test func aDamagedStateFileIsRefusedWithItsPath() async throws {
        let seed = FuzzReplay.seed
        print("WorkerStateStoreTests seed \(seed)")
        var random = SeededGenerator(seed: seed)
        var refused = 0, opened = 0
        for round in 0..<40 {
            let dir = directory()
            defer { try? FileManager.default.removeItem(at: dir) }
            let file = dir.appendingPathComponent("ferry.sqlite")
            do {  // a real database of a few hundred statuses, closed
                let store = try WorkerStateStore(directory: dir)
                for i in 0..<300 { try await store.recordFinished(TransferStatus(id: "t-\(i)", op: "upload", state: .completed)) }
            }
            var bytes = [UInt8](try Data(contentsOf: file))
            switch round % 4 {
            case 0: bytes = (0..<Int.random(in: 1...100_000, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            case 1:  // a run of noise at a random place (the header included, sometimes)
                let start = Int.random(in: 0..<bytes.count, using: &random)
                for i in start..<min(bytes.count, start + Int.random(in: 1...8192, using: &random)) { bytes[i] = UInt8.random(in: 0...255, using: &random) }
            case 2: bytes = Array(bytes.prefix(Int.random(in: 1..<bytes.count, using: &random)))
            default: bytes = Array("SQLite format 3\0".utf8) + (0..<4096).map { _ in UInt8.random(in: 0...255, using: &random) }
            }
            for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: file.path + suffix) }
            try Data(bytes).write(to: file)
            do {
                let store = try WorkerStateStore(directory: dir)
                _ = try await store.finishedStatus(id: "t-7")
                opened += 1
            } catch let error as FerryError {
                refused += 1
                #expect(error.message.contains(file.path), "round \(round): \(error)")
            } catch {
                // A read past the pages checked when opening may find the damage: SQLite says so.
                #expect("\(error)".contains("malformed") || "\(error)".contains("not a database"), "round \(round): \(error)")
            }
        }
        print("damaged state files: \(refused) refused, \(opened) opened")
        #expect(refused >= 10, "refused \(refused), opened \(opened)")

        let dir = directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("ferry.sqlite"), withIntermediateDirectories: true)
        #expect { _ = try WorkerStateStore(directory: dir) } throws: { ($0 as? FerryError)?.message.contains("cannot open state database \(dir.path)/ferry.sqlite") == true }
    }
}
