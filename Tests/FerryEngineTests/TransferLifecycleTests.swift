import FerryCore
@testable import FerryEngine
import FerryS3
import FerryStorage
import FerryTestSupport
import Foundation
import Synchronization
import Testing

/// Invariant: every transfer ends, whatever its requests do and whatever its
/// control is told meanwhile; no part is sent more often than its attempts
/// and the pauses that cut it allow; and how it ends is faithful: completed means the
/// bytes arrived whole; a request that failed for good is the transfer's
/// failure (unless a cancel came first), not a timeout after the transfer
/// spun on; any failure is one a caller can act on (the store's, cancelled;
/// never an internal one) and leaves nothing behind (no multipart upload, no
/// partial download).
///
/// Generated from a seed (`FERRY_FUZZ_SEED` replays a run): each request of a
/// transfer in parts passes, fails and is retried, fails for good, or hangs
/// until it is cut (by a pause or cancel, or by a low-speed cut-off after up
/// to 0.6 s), and in half the cases the store stops answering after a number
/// of requests (every later one hangs until cut); a driver pauses, resumes and cancels at random moments. The
/// transfer's timeout (60 s) is never needed: it would mean a transfer that
/// no longer ended on its own. `FERRY_FUZZ_MESSAGES` sets the
/// number of transfers per operation (default 16).
@Suite struct TransferLifecycleTests {
    enum Behaviour: CaseIterable { case pass, retryable, final, hang }

    static let partSize = 5 << 20

    @Test(arguments: PartFailureTests.Op.allCases)
    func everyTransferEndsConsistently(op: PartFailureTests.Op) async throws {
        let seed = FuzzReplay.seed
        print("TransferLifecycleTests \(op) seed \(seed) (FERRY_FUZZ_SEED=\(seed) replays it)")
        var random = SeededGenerator(seed: seed)
        var endings: [String: Int] = [:]
        for index in 0..<FuzzReplay.messages(default: 16) {
            let ending = try await check(op, seed: random.next(), label: "\(op)-\(index)")
            endings[ending, default: 0] += 1
        }
        print("TransferLifecycleTests \(op): \(endings.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", "))")
    }

    /// One generated transfer; returns how it ended.
    func check(_ op: PartFailureTests.Op, seed: UInt64, label: String) async throws -> String {
        var random = SeededGenerator(seed: seed)
        let (base, root, real, store) = try LostCompletionTests.scene("lifecycle")
        defer { try? FileManager.default.removeItem(at: base) }
        let parts = Int.random(in: 2...6, using: &random)
        let concurrency = Int.random(in: 1...4, using: &random)
        let engine = try SourceChangeTests.engine(store, dataRoot: root) {
            $0.multipartThreshold = Int64(Self.partSize); $0.partSize = Int64(Self.partSize)
            $0.partConcurrency = concurrency
            $0.retryPolicy = RetryPolicy(retryLimit: 2, baseDelaySeconds: 0.005, maxDelaySeconds: 0.02)
            $0.timeoutSeconds = 60
        }
        // Each request draws its behaviour; weights differ from case to case.
        let weights = (pass: Int.random(in: 3...10, using: &random), retryable: Int.random(in: 0...3, using: &random),
                       final: Int.random(in: 0...2, using: &random), hang: Int.random(in: 0...3, using: &random))
        // Drawn from the case's seed, the part and its attempt: the same whatever the schedule.
        let draws = random.next()
        // In some cases the store stops answering after a number of requests (it filled,
        // say): every later request hangs until cut, retries too.
        let stuckAfter = Bool.random(using: &random) ? Int.random(in: 1...(2 * parts), using: &random) : Int.max
        let requests = Atomic(0)
        let sentPerPart = Mutex<[Int: Int]>([:])
        let pauses = Atomic(0)
        // A pause or cancel may cut a request as it fails; without either, its failure must be the transfer's.
        let failedForGood = Atomic(false), interrupted = Atomic(false)
        let behave: @Sendable (Int) async throws(FerryError) -> Void = { number throws(FerryError) in
            let sent = sentPerPart.withLock { counts -> Int in counts[number, default: 0] += 1; return counts[number, default: 0] }
            var g = SeededGenerator(seed: draws &+ UInt64(number) &* 0x9E37_79B9 &+ UInt64(sent) &* 0x85EB_CA6B)
            let stuck = requests.add(1, ordering: .relaxed).newValue > stuckAfter
            let pick = stuck ? Int.max : Int.random(in: 0..<(weights.pass + weights.retryable + weights.final + weights.hang), using: &g)
            switch pick {
            case ..<weights.pass: return
            case ..<(weights.pass + weights.retryable): throw FerryError(.connectionError, "part \(number): Connection reset by peer (curl 56)")
            case ..<(weights.pass + weights.retryable + weights.final):
                failedForGood.store(true, ordering: .relaxed)
                throw FerryError(.accessDenied, "part \(number): Access Denied (HTTP 403)")
            default:
                let cutOff = Int.random(in: 100...600, using: &g)
                try? await Task.sleep(for: .milliseconds(cutOff))
                // A cut request takes a moment to end (curl's abort goes through its event loop).
                await Task.detached { try? await Task.sleep(for: .milliseconds(cutOff % 5)) }.value
                throw FerryError(.connectionError, "part \(number): Operation too slow (curl 28)")
            }
        }
        let size = parts * Self.partSize - Int.random(in: 0..<Self.partSize, using: &random)
        var bytes = [UInt8](repeating: 0, count: size)
        let stamp = UInt8.random(in: 1...255, using: &random)
        for i in stride(from: 0, to: size, by: 4096) { bytes[i] = stamp &+ UInt8(truncatingIfNeeded: i >> 12) }
        let file = root.appendingPathComponent("obj.bin")
        let job = try await PartFailureTests.job(op, of: bytes, partSize: Self.partSize, at: file, label: label, real: real,
                                                 store: store, behave: behave)
        // The driver: a few pauses, resumes and perhaps a cancel, at random moments; it leaves the transfer running.
        let control = TransferControl()
        let actions = (0..<Int.random(in: 0...6, using: &random)).map { _ in
            (Int.random(in: 0...40, using: &random), Int.random(in: 0..<10, using: &random))
        }
        let driver = Task {
            for (wait, action) in actions {
                try await Task.sleep(for: .milliseconds(wait))
                switch action {
                case 0..<4:
                    interrupted.store(true, ordering: .relaxed)
                    if control.pause() { pauses.add(1, ordering: .relaxed) }
                case 4..<8: control.resume()
                case 8: interrupted.store(true, ordering: .relaxed); control.cancel()
                default: await Task.yield()
                }
            }
            control.resume()
        }
        let (result, ended) = await PartFailureTests.run(job, on: engine, control: control, within: .seconds(90))
        driver.cancel()
        let what = "\(label) (seed \(seed), \(parts) parts, \(concurrency) at once, weights \(weights), "
            + "store stuck after \(stuckAfter == .max ? "never" : "\(stuckAfter) requests"), actions \(actions))"
        #expect(ended, "\(what): did not end within 90 s")
        // Each part is sent at most once per attempt, and again after each pause (which cuts it).
        let most = sentPerPart.withLock { $0.values.max() ?? 0 }, bound = 3 + pauses.load(ordering: .relaxed)
        #expect(most <= bound, "\(what): a part was sent \(most) times (at most \(bound) expected)")
        switch result {
        case .success(let outcome):
            let stored: Data
            switch op {
            case .upload:
                let copy = root.appendingPathComponent("check.bin")
                let fd = open(copy.path, O_CREAT | O_TRUNC | O_WRONLY, 0o600)
                defer { close(fd) }
                _ = try await real.getObject(GetObjectInput(bucket: "bkt", key: "obj.bin"), into: fd, at: 0, progress: nil)
                stored = try Data(contentsOf: copy)
            case .download:
                stored = try Data(contentsOf: file)
            }
            #expect(stored == Data(bytes), "\(what): completed with other bytes (\(stored.count) of \(size))")
            #expect(outcome.object.size == Int64(size), "\(what)")
            return "completed"
        case .failure(let error):
            let expected: Set<FerryError.Code> = [.connectionError, .accessDenied, .cancelled]
            #expect(expected.contains(error.code), "\(what): ended with \(error)")
            if failedForGood.load(ordering: .relaxed) && !interrupted.load(ordering: .relaxed) {
                #expect(error.code == .accessDenied, "\(what): a request failed for good, and the transfer ended with \(error)")
            }
            switch op {
            case .upload:
                #expect(try await real.listMultipartUploads(bucket: "bkt", prefix: "").isEmpty, "\(what): upload left behind after \(error)")
                #expect(try await real.headObject(bucket: "bkt", key: "obj.bin", headers: [:]) == nil, "\(what): an object after \(error)")
            case .download:
                let left = try FileManager.default.contentsOfDirectory(atPath: root.path)
                #expect(!left.contains("obj.bin") && !left.contains { $0.hasPrefix(".obj.bin.ferry-") },
                        "\(what): a failed download left \(left)")
            }
            return error.code.rawValue
        }
    }
}
