@testable import FerryS3
@testable import FerryLocalStore
@testable import FerryStorage
import FerryCore
import FerryTestSupport
import Foundation
import Synchronization
import Testing
import FerryConcurrency

/// Invariant: `DirectorySync.sync()` returns success only after an fsync of
/// the directory that began after the call and succeeded; callers that
/// overlap share fsyncs. Checked with an fsync that sleeps and fails at
/// random (seeded), against a log of events in one order.
@Suite struct DirectorySyncTests {
    /// Events in the order they happened, numbered by one counter.
    final class Log: Sendable {
        let clock = Atomic<Int>(0)
        let entries = Mutex<[(kind: String, start: Int, end: Int)]>([])
        func tick() -> Int { clock.add(1, ordering: .sequentiallyConsistent).newValue }
        func record(_ kind: String, _ start: Int, _ end: Int) { entries.withLock { $0.append((kind, start, end)) } }
    }

    @Test(arguments: [5, 23, 99])
    func everySuccessIsCoveredByAnFsyncThatBeganAfterIt(seed: UInt64) async throws {
        let log = Log()
        let plan = Mutex(SeededGenerator(seed: seed))
        let sync = DirectorySync(path: "/unused") { _ in
            let (pause, fails) = plan.withLock { random in
                (Int.random(in: 0...2_000, using: &random), Int.random(in: 0..<5, using: &random) == 0)
            }
            let start = log.tick()
            usleep(useconds_t(pause))
            let end = log.tick()
            log.record(fails ? "failed" : "fsync", start, end)
            return fails ? FerryError(.localIOError, "injected") : nil
        }
        let pool = BlockingPool(threads: 8, name: "dirsync-test")
        let calls = 400
        let outcomes = await withTaskGroup(of: (Int, Int, Bool).self) { group in
            for _ in 0..<calls {
                group.addTask {
                    await pool.run { () -> (Int, Int, Bool) in
                        let start = log.tick()
                        let ok: Bool
                        do { try sync.sync(); ok = true } catch { ok = false }
                        return (start, log.tick(), ok)
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        let fsyncs = log.entries.withLock { $0 }
        let good = fsyncs.filter { $0.kind == "fsync" }
        for (start, end, ok) in outcomes where ok {
            #expect(good.contains { $0.start > start && $0.end < end }, "a call [\(start), \(end)] returned without an fsync inside it")
        }
        // Every call ends (a failure is reported to the caller that led it; the others retry).
        #expect(outcomes.count == calls)
        #expect(outcomes.filter { !$0.2 }.count == fsyncs.count - good.count, "each failed fsync fails the one call that led it")
        // Overlapping calls share fsyncs: far fewer than one each.
        #expect(fsyncs.count < calls / 2, "\(fsyncs.count) fsyncs for \(calls) calls")
    }

    @Test func syncsARealDirectoryAndReportsAMissingOne() async throws {
        let dir = try TestPaths.temporaryDirectory("dirsync")
        defer { try? FileManager.default.removeItem(at: dir) }
        let present = DirectorySync(path: dir.path)
        let absent = DirectorySync(path: dir.appendingPathComponent("absent").path)
        try await BlockingPool.shared.run { () throws(FerryError) in try present.sync() }
        await #expect(throws: FerryError.self) {
            try await BlockingPool.shared.run { () throws(FerryError) in try absent.sync() }
        }
    }
}
