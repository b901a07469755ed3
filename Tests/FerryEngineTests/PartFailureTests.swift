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

/// Invariant: when one part (or range) of a transfer fails for good, the
/// transfer ends with that failure at once: the parts still in flight stop
/// and are not sent again, however long their requests take to wind down
/// once cut (a real one takes a moment: curl's abort, a file read).
///
/// Before, a part cut by its task's cancellation took the cut for a pause and
/// was sent again, cut again, without end: the transfer spun on a core, logged
/// only at info level and never ended (seen on Ceph as its store filled).
/// Cases are generated from a seed; `FERRY_FUZZ_SEED` replays a run.
@Suite struct PartFailureTests {
    enum Op: String, CaseIterable, Sendable { case upload, download }

    struct Case: CustomStringConvertible {
        var parts: Int
        var concurrency: Int
        /// The part that fails for good; those before it are stored, those after it hang until cut.
        var failing: Int
        var final: Bool
        var windDownMilliseconds: Int
        var description: String {
            "\(parts) parts, \(concurrency) at once, part \(failing) fails \(final ? "finally" : "after its retry"), "
                + "cut requests take \(windDownMilliseconds) ms to end"
        }
    }

    static let partSize = 5 << 20

    @Test(arguments: Op.allCases)
    func onePartsFailureEndsTheTransfer(op: Op) async throws {
        let seed = FuzzReplay.seed
        print("PartFailureTests \(op) seed \(seed) (FERRY_FUZZ_SEED=\(seed) replays it)")
        var random = SeededGenerator(seed: seed)
        for index in 0..<10 {
            let parts = Int.random(in: 3...8, using: &random)
            // A download's first range learns the size; a later one fails.
            let failing = Int.random(in: (op == .download ? 2 : 1)...parts, using: &random)
            let c = Case(parts: parts, concurrency: Int.random(in: 2...5, using: &random), failing: failing,
                         final: Bool.random(using: &random), windDownMilliseconds: Int.random(in: 0...30, using: &random))
            try await check(op, c, label: "\(op)-\(index)")
        }
    }

    /// The job both generated suites run: `bytes` put where the transfer reads
    /// them (the file to upload, the object to download), and `behave` run before
    /// each part's request or range's GET (numbered from 1; a throw is its failure).
    static func job(_ op: Op, of bytes: [UInt8], partSize: Int, at file: URL, label: String, real: LocalObjectStore,
                    store: CountingStore, behave: @escaping @Sendable (Int) async throws(FerryError) -> Void) async throws -> TransferJob {
        switch op {
        case .upload:
            try Data(bytes).write(to: file)
            store.beforePart.withLock { $0 = behave }
            return TransferJob(request: TransferRequest(id: label, op: .upload, bucket: "bkt", key: "obj.bin",
                                                        source: file.absoluteString), objectKey: "obj.bin")
        case .download:
            _ = try await real.putObject(PutObjectInput(bucket: "bkt", key: "obj.bin"), body: .bytes(bytes), progress: nil)
            let rangeSize = Int64(partSize)
            store.beforeRangedGet.withLock { $0 = { first throws(FerryError) in try await behave(Int(first / rangeSize) + 1) } }
            return TransferJob(request: TransferRequest(id: label, op: .download, bucket: "bkt", key: "obj.bin",
                                                        destination: file.absoluteString), objectKey: "obj.bin")
        }
    }

    func check(_ op: Op, _ c: Case, label: String) async throws {
        let (base, root, real, store) = try LostCompletionTests.scene("part-failure")
        defer { try? FileManager.default.removeItem(at: base) }
        let engine = try SourceChangeTests.engine(store, dataRoot: root) {
            $0.multipartThreshold = Int64(Self.partSize); $0.partSize = Int64(Self.partSize)
            $0.partConcurrency = c.concurrency
            $0.retryPolicy = RetryPolicy(retryLimit: 1, baseDelaySeconds: 0.01, maxDelaySeconds: 0.02)
        }
        let failure = c.final ? FerryError(.accessDenied, "part \(c.failing): Access Denied (HTTP 403)")
                              : FerryError(.connectionError, "part \(c.failing): Connection reset by peer (curl 56)")
        let windDown = c.windDownMilliseconds
        let failedAt = Mutex<ContinuousClock.Instant?>(nil)
        // Parts before the failing one pass; the failing one fails once others are under
        // way; later ones hang until cut, then take `windDown` to end (not cancellable).
        let behave: @Sendable (Int) async throws(FerryError) -> Void = { number throws(FerryError) in
            if number < c.failing { return }
            if number == c.failing {
                try? await Task.sleep(for: .milliseconds(50))
                failedAt.withLock { $0 = $0 ?? .now }
                throw failure
            }
            try? await Task.sleep(for: .seconds(60))
            await Task.detached { try? await Task.sleep(for: .milliseconds(windDown)) }.value
            throw FerryError(.connectionError, "part \(number): the request was aborted")
        }
        let size = c.parts * Self.partSize - 1234
        let bytes = [UInt8](repeating: 0x5A, count: size)  // the transfer fails: what the bytes are does not matter
        let file = root.appendingPathComponent("obj.bin")
        let job = try await Self.job(op, of: bytes, partSize: Self.partSize, at: file, label: label, real: real, store: store,
                                     behave: behave)
        let control = TransferControl()
        // The bounds are generous (parts before the failing one still finish their writes, on a
        // loaded machine or under ThreadSanitizer): a transfer that spins never ends.
        let (result, ended) = await Self.run(job, on: engine, control: control, within: .seconds(120))
        let after = failedAt.withLock { $0 }.map { $0.duration(to: .now) }
        #expect(ended && after.map { $0 < .seconds(30) } == true,
                "\(c): the transfer ended \(after.map { "\($0)" } ?? "never") after its part's failure (by the watchdog: \(!ended))")
        switch result {
        case .success(let outcome): Issue.record("\(c): completed despite a failed part: \(outcome)")
        case .failure(let error): #expect(error.code == failure.code, "\(c): \(error)")
        }
        // No part sent again after the failure: each hanging part once, the failing one once per attempt.
        let sent: [Int] = switch op {
        case .upload: store.uploadedParts.withLock { $0 }
        case .download: []
        }
        for number in Set(sent) {
            let times = sent.filter { $0 == number }.count
            #expect(times <= (number == c.failing && !c.final ? 2 : 1), "\(c): part \(number) sent \(times) times")
        }
        if op == .download {
            #expect(store.rangedGets.withLock { $0 } <= c.parts + 1, "\(c): \(store.rangedGets.withLock { $0 }) ranged GETs")
            #expect(!FileManager.default.fileExists(atPath: file.path), "\(c): a failed download left a file")
        } else {
            #expect(try await real.listMultipartUploads(bucket: "bkt", prefix: "").isEmpty, "\(c): the upload was not aborted")
        }
    }

    /// The same for a transfer waiting for a slot: its task cancelled (its caller
    /// gave up on it), it ends at once instead of waiting again, without end.
    @Test func aTransferWhoseTaskIsCancelledStopsWaitingForASlot() async throws {
        let (base, root, _, store) = try LostCompletionTests.scene("slot-wait")
        defer { try? FileManager.default.removeItem(at: base) }
        var configuration = TransferEngine.Configuration()
        configuration.maxTransfers = 1
        let engine = TransferEngine(store: store, dataRoot: try DataRoot(root.path), configuration: configuration,
                                    logger: Logger(label: "test.slot-wait"))
        let file = root.appendingPathComponent("small.bin")
        try Data(repeating: 1, count: 1000).write(to: file)
        func job(_ id: String) -> TransferJob {
            TransferJob(request: TransferRequest(id: id, op: .upload, bucket: "bkt", key: id, source: file.absoluteString), objectKey: id)
        }
        // The first transfer holds the only slot: its PUT's answer never comes.
        store.afterPutStored.withLock { $0 = {} }
        let holder = TransferControl()
        let first = Task { try await engine.run(job("holder"), control: holder) }
        while store.puts.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(5)) }
        let waiter = TransferControl()
        let second = Task { await Self.run(job("waiter"), on: engine, control: waiter, within: .seconds(10)) }
        try await Task.sleep(for: .milliseconds(100))
        second.cancel()
        let (result, ended) = await second.value
        #expect(ended, "a transfer whose task was cancelled went on waiting for a slot")
        if case .failure(let error) = result { #expect(error.code == .cancelled, "\(error)") } else { Issue.record("it ran: \(result)") }
        #expect(store.puts.withLock { $0.count } == 1)
        holder.cancel()
        _ = try? await first.value
    }

    /// And while paused: a task cancelled at a checkpoint (a part's, when a
    /// sibling fails for good as the pause lands) throws `Cancelled` at once
    /// instead of waiting for a resume that may never come; a task that is not
    /// cancelled still waits, and goes on at the resume.
    @Test func aCancelledTaskDoesNotWaitForAResume() async throws {
        let control = TransferControl()
        control.pause()
        let cut = Task { () async throws -> Void in try await control.checkpoint() }
        let kept = Task { () async throws -> Void in try await control.checkpoint() }
        try await Task.sleep(for: .milliseconds(50))
        cut.cancel()
        let watchdog = Task { try await Task.sleep(for: .seconds(10)); control.resume() }
        let outcome = await cut.result
        #expect(control.state == .paused, "the cancelled task waited until the watchdog resumed the transfer")
        if case .failure(let error) = outcome { #expect((error as? FerryError)?.code == .cancelled, "\(error)") } else { Issue.record("passed the checkpoint while paused") }
        watchdog.cancel()
        control.resume()
        let keptOutcome = await kept.result
        #expect(throws: Never.self) { try keptOutcome.get() }
        // Cancelled before it came: it throws without waiting either.
        control.pause()
        let late = Task { () async throws -> Void in
            withUnsafeCurrentTask { $0?.cancel() }
            try await control.checkpoint()
        }
        let lateWatchdog = Task { try await Task.sleep(for: .seconds(10)); control.resume() }
        if case .success = await late.result { Issue.record("a cancelled task passed the checkpoint while paused") }
        #expect(control.state == .paused, "the cancelled task waited until the watchdog resumed the transfer")
        lateWatchdog.cancel()
        control.resume()
    }

    /// Runs the transfer; if it has not ended within `limit`, cancels it (so a
    /// spinning run stops and the suite goes on) and says so.
    static func run(_ job: TransferJob, on engine: TransferEngine, control: TransferControl,
                    within limit: Duration) async -> (Result<TransferOutcome, FerryError>, ended: Bool) {
        let overran = Atomic(false)
        let watchdog = Task {
            try await Task.sleep(for: limit)
            overran.store(true, ordering: .relaxed)
            control.cancel(FerryError(.timedOut, "test watchdog"))
        }
        defer { watchdog.cancel() }
        let result: Result<TransferOutcome, FerryError>
        do { result = .success(try await engine.run(job, control: control)) } catch { result = .failure(error) }
        return (result, !overran.load(ordering: .relaxed))
    }
}
