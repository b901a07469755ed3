import FerryCore
@testable import FerryEngine
import FerryS3
import FerryLocalStore
import FerryStorage
import FerryTestSupport
import Foundation
import Logging
import Synchronization
import Testing

/// Only regular files are transferred, and nothing a transfer waits on can hold
/// its slot past its bound.
@Suite struct SpecialFileTests {
    func setUp() throws -> (base: URL, root: URL, engine: TransferEngine) {
        let base = try TestPaths.temporaryDirectory("special")
        let root = base.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("dir"), withIntermediateDirectories: true)
        #expect(mkfifo(root.appendingPathComponent("fifo").path, 0o644) == 0)
        let engine = TransferEngine(store: try LocalObjectStore(root: base.appendingPathComponent("store")),
                                    dataRoot: try DataRoot(root.path), logger: Logger(label: "test.special"))
        return (base, root, engine)
    }

    /// A FIFO without a writer used to block the open for ever; a directory or
    /// device is no file either. Each is `InvalidPath`, at once.
    @Test(arguments: ["fifo", "dir", "/dev/zero", "/dev/null"])
    func specialSourcesAreRefusedAtOnce(name: String) async throws {
        let (base, root, engine) = try setUp()
        defer { try? FileManager.default.removeItem(at: base) }
        let path = name.hasPrefix("/") ? name : root.appendingPathComponent(name).path
        let request = TransferRequest(id: "sp-\(name.count)", op: .upload, bucket: "bkt", key: "k", source: "file://\(path)")
        let started = ContinuousClock.now
        do {
            _ = try await engine.run(TransferJob(request: request, objectKey: "public/k"))
            Issue.record("uploaded \(name)")
        } catch {
            #expect(error.code == .invalidPath, "\(error)")
        }
        // "At once": no wait on the file; the bound is loose for a loaded machine, a hang is for ever.
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(throws: FerryError.self) { try engine.preflight(TransferJob(request: request, objectKey: "public/k")) }
    }

    @Test func aFIFOOrDirectoryIsNeverADownloadDestination() async throws {
        let (base, root, engine) = try setUp()
        defer { try? FileManager.default.removeItem(at: base) }
        _ = try await engine.store.putObject(PutObjectInput(bucket: "bkt", key: "public/k"), body: .bytes([1, 2, 3]))
        for name in ["fifo", "dir"] {
            let request = TransferRequest(id: "dl-\(name)", op: .download, bucket: "bkt", key: "k",
                                          destination: root.appendingPathComponent(name).absoluteString)
            #expect(throws: FerryError.self) { try engine.preflight(TransferJob(request: request, objectKey: "public/k")) }
            do {
                _ = try await engine.run(TransferJob(request: request, objectKey: "public/k"))
                Issue.record("downloaded over \(name)")
            } catch {
                #expect(error.code == .invalidPath, "\(error)")
            }
        }
        // A FIFO planted where the temp file goes is refused without blocking, too.
        let request = TransferRequest(id: "dl-temp", op: .download, bucket: "bkt", key: "k",
                                      destination: root.appendingPathComponent("plain.bin").absoluteString)
        #expect(mkfifo(root.appendingPathComponent(".plain.bin.ferry-dl-temp.part").path, 0o644) == 0)
        await #expect(throws: FerryError.self) { _ = try await engine.run(TransferJob(request: request, objectKey: "public/k")) }
        var info = stat()
        #expect(lstat(root.appendingPathComponent("fifo").path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO)
    }

    /// A transfer stuck where cancellation cannot reach still gives its slot
    /// back: `TimedOut` after its timeout plus the clean-up time.
    @Test func theTimeoutEndsATransferThatIgnoresCancellation() async throws {
        let control = TransferControl()
        let started = ContinuousClock.now
        // Stuck where no cancellation reaches: a continuation resumed only after the test is done.
        let stuck = Mutex<CheckedContinuation<Void, Never>?>(nil)
        defer { stuck.withLock { $0?.resume(); $0 = nil } }
        do {
            _ = try await TransferEngine.withTimeout(0.3, control: control, logger: Logger(label: "test.timeout"), cleanupSeconds: 0.3) {
                () async throws(FerryError) -> TransferOutcome in
                await withCheckedContinuation { continuation in stuck.withLock { $0 = continuation } }
                throw FerryError(.internalError, "should have been abandoned")
            }
            Issue.record("returned a result")
        } catch {
            #expect(error.code == .timedOut)
        }
        #expect(ContinuousClock.now - started < .seconds(20))
        #expect(control.state == .cancelled)
    }
}

/// A transfer's timeout counts the time it runs, not the time it is paused.
@Suite struct RunningTimeDeadlineTests {
    @Test func pausesStopTheClock() async throws {
        // Paused at once, so however late this task runs on a loaded machine the
        // second of running time cannot have passed before the pause.
        let control = TransferControl()
        control.pause()
        let fired = Mutex<ContinuousClock.Instant?>(nil)
        let deadline = RunningTimeDeadline.start(seconds: 1, control: control) { fired.withLock { $0 = .now } }
        defer { deadline.cancel() }
        try await Task.sleep(for: .seconds(2))
        #expect(fired.withLock { $0 } == nil, "fired while paused")
        let resumed = ContinuousClock.now
        control.resume()
        #expect(await eventually(timeout: 15, every: 0.05) { fired.withLock { $0 } != nil })
        let after = resumed.duration(to: fired.withLock { $0 }!)
        // One second of running time from the resume; generous above for a loaded machine.
        #expect(after >= .milliseconds(950) && after < .seconds(10), "fired \(after) after the resume")
    }

    @Test func aTransferPausedBeforeItStartsHasItsWholeBudget() async throws {
        let control = TransferControl()
        control.pause()
        let fired = Mutex(false)
        let deadline = RunningTimeDeadline.start(seconds: 0.3, control: control) { fired.withLock { $0 = true } }
        defer { deadline.cancel() }
        try await Task.sleep(for: .seconds(1))
        #expect(!fired.withLock { $0 })
        control.resume()
        #expect(await eventually(timeout: 3, every: 0.05) { fired.withLock { $0 } })
    }
}

/// A finished transfer leaves nothing behind: its control (and what hangs off
/// it: the meter's observer, the run, the progress reporter) is freed.
@Suite struct FinishedTransferMemoryTests {
    @Test func aFinishedTransfersControlIsFreed() async throws {
        let base = try TestPaths.temporaryDirectory("memory")
        defer { try? FileManager.default.removeItem(at: base) }
        let root = base.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try Data(repeating: 7, count: 64 << 10).write(to: root.appendingPathComponent("in.bin"))
        let engine = TransferEngine(store: try LocalObjectStore(root: base.appendingPathComponent("store")),
                                    dataRoot: try DataRoot(root.path), logger: Logger(label: "test.memory"))
        weak var finished: TransferControl?
        weak var failed: TransferControl?
        do {
            let control = TransferControl()
            finished = control
            let request = TransferRequest(id: "mem-1", op: .upload, bucket: "bkt", key: "k",
                                          source: root.appendingPathComponent("in.bin").absoluteString)
            _ = try await engine.run(TransferJob(request: request, objectKey: "public/k"), control: control) { _ in }
        }
        do {
            let control = TransferControl()
            failed = control
            let request = TransferRequest(id: "mem-2", op: .download, bucket: "bkt", key: "missing",
                                          destination: root.appendingPathComponent("out.bin").absoluteString)
            _ = try? await engine.run(TransferJob(request: request, objectKey: "public/missing"), control: control) { _ in }
        }
        // The cancelled timeout timer lets go of the control when it next runs.
        _ = await eventually(timeout: 5, every: 0.05) { finished == nil && failed == nil }
        #expect(finished == nil, "a completed transfer's control is still referenced")
        #expect(failed == nil, "a failed transfer's control is still referenced")
    }
}
