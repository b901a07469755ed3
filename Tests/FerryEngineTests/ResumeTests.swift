import FerryCore
@testable import FerryEngine
import FerryS3
import FerryStorage
import FerryTestSupport
import Foundation
import Synchronization
import Testing

/// A journal kept in memory: what the worker keeps in SQLite, for engine tests.
final class MemoryJournal: TransferJournal {
    private struct State {
        var uploads: [String: (transferId: String, location: ObjectLocation, parts: [Int: CompletedPart], ended: Bool)] = [:]
        var downloads: [String: (eTag: String, partSize: Int64, parts: Set<Int>)] = [:]
    }
    private let state = Mutex(State())

    func openUpload(transferId: String, location: ObjectLocation) async -> (uploadId: String, parts: [CompletedPart])? {
        state.withLock { s in
            s.uploads.first { $0.value.transferId == transferId && $0.value.location == location && !$0.value.ended }
                .map { ($0.key, Array($0.value.parts.values)) }
        }
    }
    func uploadStarted(transferId: String, location: ObjectLocation, uploadId: String) async {
        state.withLock { $0.uploads[uploadId] = (transferId, location, [:], false) }
    }
    func partUploaded(uploadId: String, part: CompletedPart) async {
        state.withLock { $0.uploads[uploadId]?.parts[part.partNumber] = part }
    }
    func uploadEnded(uploadId: String) async {
        state.withLock { $0.uploads[uploadId]?.ended = true }
    }
    func downloadedParts(transferId: String, eTag: String, partSize: Int64) async -> Set<Int> {
        state.withLock { s in
            guard let d = s.downloads[transferId], d.eTag == eTag, d.partSize == partSize else { return [] }
            return d.parts
        }
    }
    func partDownloaded(transferId: String, eTag: String, partSize: Int64, partNumber: Int) async {
        state.withLock { s in
            if s.downloads[transferId]?.eTag != eTag || s.downloads[transferId]?.partSize != partSize {
                s.downloads[transferId] = (eTag, partSize, [])
            }
            s.downloads[transferId]?.parts.insert(partNumber)
        }
    }
    var openUploads: Int { state.withLock { $0.uploads.values.filter { !$0.ended }.count } }
    func downloadedCount(_ id: String) -> Int { state.withLock { $0.downloads[id]?.parts.count ?? 0 } }
    func downloadedSet(_ id: String) -> Set<Int> { state.withLock { $0.downloads[id]?.parts ?? [] } }
    func journaledParts(_ uploadId: String) -> Set<Int> { state.withLock { Set($0.uploads[uploadId].map { Array($0.parts.keys) } ?? []) } }
}

/// Resume after a crash or hand-off: from the journal, by adopting the upload
/// an interrupted run left in S3, and by recognising an object already written.
extension TransferEngineTests {
    /// Runs `job` and hands it off once `bytes` have moved; returns the error it stopped with.
    func runUntilHandedOff(_ engine: TransferEngine, _ job: TransferJob, journal: (any TransferJournal)?, after bytes: Int64) async -> FerryError? {
        let control = TransferControl()
        do {
            _ = try await engine.run(job, control: control, journal: journal) { p in
                if p.bytesTransferred >= bytes { control.handOff("test") }
            }
            return nil
        } catch {
            #expect(control.isHandedOff)
            return error
        }
    }

    @Test func anotherRunAdoptsAHandedOffUploadAndSendsOnlyTheMissingParts() async throws {
        try await eachBackend { f in
            let (source, bytes) = try writeSource(f.root, name: "adopt.bin", size: Self.oddSize)
            let key = "adopt/\(f.name).bin"
            let location = ObjectLocation(bucket: "engine", key: key)
            let first = CountingStore(f.store)
            let stopped = await runUntilHandedOff(try engine(first, root: f.root) { $0.partConcurrency = 1 },
                                                  upload(source, key: key, id: "adopt-\(f.name)"), journal: nil, after: 2 * (8 << 20) + 1)
            #expect(stopped?.code == .cancelled)
            let uploads = try await f.store.listMultipartUploads(bucket: "engine", prefix: key)
            #expect(uploads.count == 1, "\(f.name): the handed-off upload is kept")
            let stored = try await f.store.listParts(location, uploadId: try #require(uploads.first).uploadId)
            #expect(stored.count >= 2 && stored.count < 5, "\(f.name): \(stored.count)")

            // Someone else's upload on the same key, with other bytes: never adopted.
            let foreign = try await f.store.createMultipartUpload(PutObjectInput(bucket: "engine", key: key))
            _ = try await f.store.uploadPart(location, uploadId: foreign, partNumber: 1, body: .bytes(Array(repeating: 7, count: 8 << 20)),
                                             checksum: nil, headers: [:], progress: nil)

            // A second engine (another worker: no journal) finds the upload by its parts' bytes.
            let second = CountingStore(f.store)
            let outcome = try await engine(second, root: f.root).run(upload(source, key: key, id: "adopt-\(f.name)"))
            #expect(outcome.object.eTag?.hasSuffix("-5\"") == true, "\(f.name)")
            #expect(second.uploadedParts.withLock { $0.count } == 5 - stored.count, "\(f.name): only the missing parts are sent")
            #expect(Set(second.uploadedParts.withLock { $0 }).isDisjoint(with: Set(stored.map(\.partNumber))))
            let check = f.root.appendingPathComponent("adopt.check")
            _ = try await engine(f.store, root: f.root).run(download(key: key, to: check, id: "adopt-check-\(f.name)"))
            #expect(try Data(contentsOf: check) == bytes, "\(f.name)")
            // The foreign upload is untouched.
            let left = try await f.store.listMultipartUploads(bucket: "engine", prefix: key)
            #expect(left.map(\.uploadId) == [foreign], "\(f.name)")
            try await f.store.abortMultipartUpload(location, uploadId: foreign)
        }
    }

    @Test func theJournalResumesAnUploadAndADownload() async throws {
        try await eachBackend { f in
            let (source, bytes) = try writeSource(f.root, name: "journal.bin", size: Self.oddSize)
            let key = "journal/\(f.name).bin"
            let journal = MemoryJournal()
            let first = CountingStore(f.store)
            _ = await runUntilHandedOff(try engine(first, root: f.root) { $0.partConcurrency = 1 },
                                        upload(source, key: key, id: "journal-\(f.name)"), journal: journal, after: 3 * (8 << 20) + 1)
            #expect(journal.openUploads == 1)
            let uploadId = try #require(try await f.store.listMultipartUploads(bucket: "engine", prefix: key).first).uploadId
            let stored = Set(try await f.store.listParts(ObjectLocation(bucket: "engine", key: key), uploadId: uploadId).map(\.partNumber))
            #expect(journal.journaledParts(uploadId) == stored, "\(f.name): the journal knows what S3 holds")
            let second = CountingStore(f.store)
            _ = try await engine(second, root: f.root).run(upload(source, key: key, id: "journal-\(f.name)"), journal: journal)
            let sentSecond = Set(second.uploadedParts.withLock { $0 })
            #expect(stored.count >= 3)
            #expect(sentSecond == Set(1...5).subtracting(stored), "\(f.name): \(stored) stored, then \(sentSecond) sent")
            #expect(journal.openUploads == 0, "the completed upload is closed in the journal")

            // A download handed off after four parts' worth of bytes resumes with the others.
            // The first GET spans parts 1 and 2 (the 16 MiB threshold); parts 3, 4, 5
            // follow one at a time beside it, so at least 3 and 4 are on disk by then.
            let target = f.root.appendingPathComponent("out/journal-\(f.name).bin")
            let reader = CountingStore(f.store)
            let down = download(key: key, to: target, id: "journal-down-\(f.name)")
            _ = await runUntilHandedOff(try engine(reader, root: f.root) { $0.partConcurrency = 1 }, down, journal: journal,
                                        after: 4 * (8 << 20) + 1)
            let onDisk = journal.downloadedSet("journal-down-\(f.name)")
            #expect(onDisk.count >= 2, "\(f.name): \(onDisk)")
            let temp = target.deletingLastPathComponent().appendingPathComponent(".\(target.lastPathComponent).ferry-journal-down-\(f.name).part")
            #expect(FileManager.default.fileExists(atPath: temp.path), "\(f.name): a handed-off download keeps its temp file")
            let resumed = CountingStore(f.store)
            _ = try await engine(resumed, root: f.root).run(down, journal: journal)
            #expect(try Data(contentsOf: target) == bytes, "\(f.name)")
            // The first span is read again (it carries size and ETag); the later ranges on disk are not.
            let expected = 1 + Set(3...5).subtracting(onDisk).count
            #expect(resumed.rangedGets.withLock { $0 } == expected, "\(f.name): \(onDisk) on disk, then \(resumed.rangedGets.withLock { $0 }) GETs")
            #expect(!FileManager.default.fileExists(atPath: temp.path))
        }
    }

    @Test func anObjectThatAlreadyCarriesTheTransferIdIsNotUploadedAgain() async throws {
        try await eachBackend { f in
            let (source, _) = try writeSource(f.root, name: "marked.bin", size: 20 << 20)
            var request = TransferRequest(id: "marked-\(f.name)", op: .upload, bucket: "engine", key: "marked.bin",
                                          source: source.absoluteString)
            request.metadata = [TransferMarker.transferId: request.id, TransferMarker.sequencer: "00000000000000AB"]
            let job = TransferJob(request: request, objectKey: "marked/\(f.name).bin")
            let counting = CountingStore(f.store)
            let engine = try engine(counting, root: f.root)
            let first = try await engine.run(job)
            #expect(!first.alreadyStored)
            let sent = counting.uploadedParts.withLock { $0.count }
            let again = try await engine.run(job)
            #expect(again.alreadyStored, "\(f.name)")
            #expect(again.bytesTransferred == 0)
            #expect(again.object.eTag == first.object.eTag)
            #expect(again.eventName == "ObjectCreated:CompleteMultipartUpload")
            #expect(again.storedMetadata[TransferMarker.sequencer] == "00000000000000AB")
            #expect(counting.uploadedParts.withLock { $0.count } == sent, "nothing sent the second time")

            // Another request for the same key (another id) does upload.
            var other = request
            other.id = "marked-other-\(f.name)"
            other.metadata?[TransferMarker.transferId] = other.id
            #expect(!(try await engine.run(TransferJob(request: other, objectKey: job.objectKey)).alreadyStored))
        }
    }
}
