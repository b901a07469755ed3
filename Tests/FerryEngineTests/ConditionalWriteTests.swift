import FerryCore
import FerryEngine
import FerryS3
import FerryStorage
import FerryTestSupport
import Foundation
import Synchronization
import Testing

/// Uploads of worker requests with `If-None-Match: *` (docs/internals/transfer-engine.md, "Uploads of new
/// keys: one request"), against the local store, moto and Ceph's gateway. The
/// invariant: a stream record's old image is what the key held when the write
/// happened — nothing for a new key, the object before for an overwrite — and
/// a redelivered request is never uploaded twice, whichever way the worker asked.
extension TransferEngineTests {
    /// A worker request (it carries the transfer-id marker) for `key`.
    func markedUpload(_ source: URL, key: String, id: String) -> TransferJob {
        var request = TransferRequest(id: id, op: .upload, bucket: "engine", key: key, source: source.absoluteString)
        request.metadata = [TransferMarker.transferId: id, TransferMarker.sequencer: "00000000000000AB"]
        return TransferJob(request: request, objectKey: key)
    }

    func storedBytes(_ store: any ObjectStore, key: String, root: URL) async throws -> Data {
        let target = root.appendingPathComponent("check-\(UUID().uuidString)")
        let fd = open(target.path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        defer { close(fd); unlink(target.path) }
        _ = try await store.getObject(GetObjectInput(bucket: "engine", key: key), into: fd, at: 0, progress: nil)
        return try Data(contentsOf: target)
    }

    @Test func trustedStoresTakeNewKeysInOneRequestAndStillSeeOverwritesAndRedeliveries() async throws {
        try await eachBackend { f in
            let key = "conditional/trusted-\(f.name).bin"
            let (first, _) = try writeSource(f.root, name: "c1.bin", size: 64 << 10)
            let store = CountingStore(f.store, conditionalWrites: ConditionalWrites(.on))
            let engine = try engine(store, root: f.root)

            // A new key: one conditional PUT, no HEAD, an INSERT (nothing before).
            let created = try await engine.run(markedUpload(first, key: key, id: "c1-\(f.name)"))
            #expect(store.heads.withLock { $0 } == 0, "\(f.name)")
            #expect(store.puts.withLock { $0 } == [true], "\(f.name)")
            #expect(created.previous == nil && created.previousKnown && !created.alreadyStored, "\(f.name)")

            // The same request again (a redelivery): refused, then found by the HEAD, not uploaded.
            let again = try await engine.run(markedUpload(first, key: key, id: "c1-\(f.name)"))
            #expect(again.alreadyStored, "\(f.name)")
            #expect(again.object.eTag == created.object.eTag)
            #expect(store.puts.withLock { $0 } == [true, true], "\(f.name): the refused PUT only")
            #expect(store.heads.withLock { $0 } == 1)

            // Another request for the key: an overwrite, with the first object as its old image.
            let (second, secondBytes) = try writeSource(f.root, name: "c2.bin", size: 48 << 10)
            let replaced = try await engine.run(markedUpload(second, key: key, id: "c2-\(f.name)"))
            #expect(replaced.previous?.eTag == created.object.eTag, "\(f.name)")
            #expect(replaced.previous?.size == 64 << 10)
            #expect(!replaced.alreadyStored)
            #expect(store.puts.withLock { $0 } == [true, true, true, false], "\(f.name): refused, then sent plainly")
            #expect(try await storedBytes(f.store, key: key, root: f.root) == secondBytes, "\(f.name)")
            #expect(replaced.bytesTransferred == 48 << 10)
        }
    }

    @Test func autoLearnsFromTheFirstOverwriteThatTheStoreChecksTheHeader() async throws {
        try await eachBackend { f in
            let key = "conditional/auto-\(f.name).bin"
            let (first, _) = try writeSource(f.root, name: "a1.bin", size: 32 << 10)
            let (second, secondBytes) = try writeSource(f.root, name: "a2.bin", size: 40 << 10)
            let conditional = ConditionalWrites(.auto)
            let store = CountingStore(f.store, conditionalWrites: conditional)
            let engine = try engine(store, root: f.root)

            // Not known yet: a HEAD first; a new key gives nothing to learn from.
            _ = try await engine.run(markedUpload(first, key: key, id: "a1-\(f.name)"))
            #expect(store.heads.withLock { $0 } == 1 && store.puts.withLock { $0 } == [false], "\(f.name)")
            #expect(!conditional.enforced && conditional.shouldProbe)

            // The first overwrite carries the header: the store refuses it, so it checks; the PUT goes again.
            let replaced = try await engine.run(markedUpload(second, key: key, id: "a2-\(f.name)"))
            #expect(store.puts.withLock { $0 } == [false, true, false], "\(f.name)")
            #expect(replaced.previous?.size == 32 << 10)
            #expect(conditional.enforced, "\(f.name): learned")
            #expect(try await storedBytes(f.store, key: key, root: f.root) == secondBytes)

            // From now on a new key is one request.
            let heads = store.heads.withLock { $0 }
            let created = try await engine.run(markedUpload(first, key: key + ".new", id: "a3-\(f.name)"))
            #expect(store.heads.withLock { $0 } == heads, "\(f.name)")
            #expect(store.puts.withLock { $0 }.last == true)
            #expect(created.previous == nil && created.previousKnown)
        }
    }

    @Test func aStoreThatIgnoresTheHeaderKeepsTheHeadBeforeEveryUpload() async throws {
        try await eachBackend { f in
            let key = "conditional/ignored-\(f.name).bin"
            let (first, _) = try writeSource(f.root, name: "i1.bin", size: 16 << 10)
            let (second, secondBytes) = try writeSource(f.root, name: "i2.bin", size: 24 << 10)
            let conditional = ConditionalWrites(.auto)
            let store = CountingStore(f.store, conditionalWrites: conditional, dropsIfNoneMatch: true)
            let engine = try engine(store, root: f.root)
            _ = try await engine.run(markedUpload(first, key: key, id: "i1-\(f.name)"))
            // The probe went through (the store ignored the header): the overwrite happened once, as wanted.
            let replaced = try await engine.run(markedUpload(second, key: key, id: "i2-\(f.name)"))
            #expect(store.puts.withLock { $0 } == [false, true], "\(f.name)")
            #expect(replaced.previous?.size == 16 << 10)
            #expect(!conditional.enforced && !conditional.shouldProbe, "\(f.name): learned that it does not check")
            #expect(try await storedBytes(f.store, key: key, root: f.root) == secondBytes)
            // Every later upload asks first, so an overwrite keeps its old image.
            let third = try await engine.run(markedUpload(first, key: key, id: "i3-\(f.name)"))
            #expect(store.heads.withLock { $0 } == 3)
            #expect(store.puts.withLock { $0 }.last == false)
            #expect(third.previous?.size == 24 << 10)
        }
    }

    @Test func offAlwaysAsksFirstAndCopyToolsNeverAsk() async throws {
        try await eachBackend { f in
            let (source, _) = try writeSource(f.root, name: "o1.bin", size: 8 << 10)
            let store = CountingStore(f.store, conditionalWrites: ConditionalWrites(.off))
            let engine = try engine(store, root: f.root)
            _ = try await engine.run(markedUpload(source, key: "conditional/off-\(f.name).bin", id: "o1-\(f.name)"))
            _ = try await engine.run(markedUpload(source, key: "conditional/off-\(f.name).bin", id: "o2-\(f.name)"))
            #expect(store.heads.withLock { $0 } == 2 && store.puts.withLock { $0 } == [false, false], "\(f.name)")
            // Without the marker (`ferry cp`) nothing is asked and nothing is conditional, trusted or not.
            let plain = CountingStore(f.store, conditionalWrites: ConditionalWrites(.on))
            _ = try await self.engine(plain, root: f.root).run(upload(source, key: "conditional/cp-\(f.name).bin", id: "o3-\(f.name)"))
            #expect(plain.heads.withLock { $0 } == 0 && plain.puts.withLock { $0 } == [false], "\(f.name)")
        }
    }

    /// Racing writers of one new key: the store's check makes exactly one of them
    /// the INSERT; every other sees an object before it (a HEAD first could not:
    /// all of them might find the key empty).
    @Test func racingUploadsOfOneNewKeyGiveExactlyOneInsert() async throws {
        try await eachBackend { f in
            let key = "conditional/race-\(f.name).bin"
            let (source, _) = try writeSource(f.root, name: "r.bin", size: 4 << 10)
            let engine = try engine(CountingStore(f.store, conditionalWrites: ConditionalWrites(.on)), root: f.root)
            let outcomes = try await withThrowingTaskGroup(of: TransferOutcome.self) { group in
                for i in 0..<8 {
                    group.addTask { try await engine.run(self.markedUpload(source, key: key, id: "race-\(i)-\(f.name)")) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.count == 8)
            #expect(outcomes.filter { $0.previous == nil }.count == 1, "\(f.name): \(outcomes.map { $0.previous?.eTag ?? "none" })")
            #expect(outcomes.allSatisfy { !$0.alreadyStored })
        }
    }
}
