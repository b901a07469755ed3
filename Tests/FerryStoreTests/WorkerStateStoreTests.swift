import FerryCore
import FerryStore
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
