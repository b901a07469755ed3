import FerryCore
@testable import FerryEngine
import FerryS3
import FerryTestSupport
import Foundation
import Logging
import Testing

/// Invariant: an object uploaded in parts is one version of its file, never
/// parts of two. A file written while its parts are sent (in place, appended
/// to, cut short) fails the upload, which leaves no object and no upload
/// behind; a file replaced by a rename is not a change (the open descriptor
/// reads the old bytes on) and uploads whole.
@Suite struct SourceChangeTests {
    enum Change: String, CaseIterable { case none, overwrite, append, truncate, rename }

    @Test(arguments: Change.allCases)
    func anUploadInPartsIsOneVersionOfItsFile(change: Change) async throws {
        let base = try TestPaths.temporaryDirectory("source-change")
        defer { try? FileManager.default.removeItem(at: base) }
        let root = base.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let store = CountingStore(try LocalObjectStore(root: base.appendingPathComponent("store")))
        var configuration = TransferEngine.Configuration()
        configuration.defaults.multipartThreshold = 5 << 20
        configuration.defaults.partSize = 5 << 20
        configuration.defaults.partConcurrency = 1
        let engine = TransferEngine(store: store, dataRoot: try DataRoot(root.path), configuration: configuration,
                                    logger: Logger(label: "test.source-change"))
        let file = root.appendingPathComponent("big.bin")
        let original = Data((0..<(12 << 20) + 1).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 11) })
        try original.write(to: file)
        // After the first part is stored, the file is written to (the parts after it would read the new bytes).
        store.afterPart.withLock {
            $0 = { number in
                guard number == 1 else { return }
                let fd = open(file.path, O_WRONLY)
                defer { close(fd) }
                switch change {
                case .none: break
                case .overwrite: _ = pwrite(fd, [0xEE, 0xEE, 0xEE], 3, 11 << 20)
                case .append: _ = pwrite(fd, [0xEE], 1, off_t(original.count))
                case .truncate: _ = ftruncate(fd, 7 << 20)
                case .rename:
                    let next = file.deletingLastPathComponent().appendingPathComponent("next.bin")
                    _ = FileManager.default.createFile(atPath: next.path, contents: Data(repeating: 0xEE, count: original.count))
                    _ = rename(next.path, file.path)
                }
            }
        }
        let job = TransferJob(request: TransferRequest(id: "sc-\(change)", op: .upload, bucket: "bkt", key: "big.bin",
                                                       source: file.absoluteString), objectKey: "big.bin")
        let outcome: TransferOutcome
        do {
            outcome = try await engine.run(job)
        } catch {
            #expect(![.none, .rename].contains(change), "\(change): \(error)")
            if change != .truncate {  // a cut file may fail first on its short read; either way nothing is completed
                #expect(error.code == .sourceChanged && error.message.contains("was written while it was uploaded"), "\(error)")
            }
            #expect(try await store.headObject(bucket: "bkt", key: "big.bin", headers: [:]) == nil, "\(change): an object was left")
            #expect(try await store.listMultipartUploads(bucket: "bkt", prefix: "").isEmpty, "\(change): an upload was left")
            return
        }
        #expect([.none, .rename].contains(change), "\(change): completed as \(outcome.object)")
        let back = root.appendingPathComponent("back.bin")
        _ = try await engine.run(TransferJob(request: TransferRequest(id: "sc-back", op: .download, bucket: "bkt", key: "big.bin",
                                                                      destination: back.absoluteString), objectKey: "big.bin"))
        // Counted, not compared whole: a failed == of 12 MiB takes the test library minutes to describe.
        let stored = try Data(contentsOf: back)
        #expect(stored.count == original.count && zip(stored, original).filter { $0 != $1 }.isEmpty, "\(change): not the file as it was")
    }
}
