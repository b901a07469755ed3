import FerryCore
import FerryEngine
@testable import FerryWorker
import FerryTestSupport
import Logging
import Synchronization
import Testing

/// The gate transfers wait at while the store does not answer: who waits,
/// what wakes them, and that failures soon after a probe take its answer.
@Suite struct StorageGateTests {
    /// A store that answers or not, counting the probes it gets.
    final class Store: Sendable {
        let up = Atomic<Bool>(true)
        let probes = Atomic<Int>(0)
        func probe() throws(FerryError) {
            probes.add(1, ordering: .relaxed)
            guard up.load(ordering: .relaxed) else { throw FerryError(.connectionError, "connection refused") }
        }
    }

    final class Count: Sendable { let value = Atomic<Int>(0) }

    func gate(_ store: Store, health: WorkerHealth = WorkerHealth(), reuse: Double = 1) -> StorageGate {
        StorageGate(health: health, probeReuseSeconds: reuse, logger: Logger(label: "test.gate")) { () throws(FerryError) in
            try store.probe()
        }
    }

    static let refused = FerryError(.connectionError, "connection refused")

    @Test func onlyAFailureThatGotNoAnswerIsAnOutage() async {
        let store = Store()
        store.up.store(false, ordering: .relaxed)
        let gate = gate(store)
        // An answer from the store is the transfer's own failure: no probe, no wait.
        for code in [FerryError.Code.accessDenied, .noSuchKey, .slowDown, .storageError, .badDigest, .timedOut, .cancelled] {
            #expect(await !gate.confirmsOutage(FerryError(code, "x")), "\(code)")
        }
        // So is an upload source that gives no answer: it says nothing of the store.
        var source = Self.refused
        source.isSourceFailure = true
        #expect(await !gate.confirmsOutage(source))
        #expect(store.probes.load(ordering: .relaxed) == 0)
        #expect(gate.isReachable)
        #expect(await gate.confirmsOutage(Self.refused))
        #expect(await gate.confirmsOutage(FerryError(.credentialsUnavailable, "no role")))
        #expect(!gate.isReachable)
    }

    @Test func aFailureWhileTheStoreAnswersIsReported() async {
        let store = Store()
        let health = WorkerHealth(transfers: false)
        let gate = gate(store, health: health)
        #expect(await !gate.confirmsOutage(Self.refused))
        #expect(gate.isReachable)
        #expect(health.report().checks["storage"] == "ok")
    }

    @Test func failuresSoonAfterAProbeShareItsAnswer() async {
        let store = Store()
        store.up.store(false, ordering: .relaxed)
        let gate = gate(store, reuse: 60)
        let confirmed = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<64 { group.addTask { await gate.confirmsOutage(Self.refused) } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(confirmed == 64)
        // After the first answer, none probes again within the reuse window.
        let before = store.probes.load(ordering: .relaxed)
        for _ in 0..<64 { #expect(await gate.confirmsOutage(Self.refused)) }
        #expect(store.probes.load(ordering: .relaxed) == before)
    }

    /// A store that fell silent fails many requests at once: they share the
    /// probe under way (one, not one each), and all take its answer.
    @Test func confirmationsDuringAProbeShareIt() async {
        let probes = SharedCounter()
        let gate = StorageGate(health: WorkerHealth(), probeReuseSeconds: 0, logger: Logger(label: "test.gate")) { () async throws(FerryError) in
            probes.add()
            try? await Task.sleep(for: .seconds(1))  // a slow answer: the others come while it is under way
            throw FerryError(.connectionError, "timed out")
        }
        let confirmed = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<64 { group.addTask { await gate.confirmsOutage(Self.refused) } }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(confirmed == 64 && probes.value == 1, "\(confirmed) confirmed, \(probes.value) probes")
        // The next check, after that probe ended, probes again (no reuse window here).
        #expect(await gate.confirmsOutage(Self.refused))
        #expect(probes.value == 2)
    }

    /// A probe under way since before the store went down answers, but says
    /// nothing of a failure after it: the failure waits for a probe begun after
    /// it. (Taking that answer once failed a transfer the outage had cut:
    /// `StorageOutageTests` in a CI run.) Nor does a recent answer clear it.
    @Test func onlyAProbeBegunAfterAFailureClearsIt() async throws {
        let store = Store()
        let probes = SharedCounter()
        let gate = StorageGate(health: WorkerHealth(), probeReuseSeconds: 60, logger: Logger(label: "test.gate")) { () async throws(FerryError) in
            let upWhenAsked = store.up.load(ordering: .relaxed)
            probes.add()
            try? await Task.sleep(for: .seconds(1))
            guard upWhenAsked else { throw FerryError(.connectionError, "connection refused") }
        }
        let underWay = Task { await gate.check() }
        while probes.value < 1 { try await Task.sleep(for: .milliseconds(5)) }  // it has asked the store (up)
        store.up.store(false, ordering: .relaxed)  // the store goes down; a request fails
        #expect(await gate.confirmsOutage(Self.refused), "taken for the transfer's own failure")
        #expect(await underWay.value, "the probe under way was answered")
        #expect(probes.value == 2)
        // Up again, answered; down again: the recent answer does not clear the next failure either.
        store.up.store(true, ordering: .relaxed)
        #expect(await gate.check())
        store.up.store(false, ordering: .relaxed)
        #expect(await gate.confirmsOutage(Self.refused))
        #expect(probes.value == 4)
    }

    @Test func waitersResumeWhenTheStoreAnswersAgain() async throws {
        let store = Store()
        store.up.store(false, ordering: .relaxed)
        let health = WorkerHealth(transfers: false)
        let gate = gate(store, health: health)
        await gate.check()
        #expect(health.report().checks["storage"]?.hasPrefix("unreachable: ") == true)
        let far = ContinuousClock.now.advanced(by: .seconds(600))
        let woken = Count()
        let waiters = (0..<20).map { _ in
            Task { () -> StorageGate.Wake in
                defer { woken.value.add(1, ordering: .relaxed) }
                return await gate.waitUntilReachable(until: far, control: TransferControl())
            }
        }
        // Still down: nobody wakes, however often it is probed.
        for _ in 0..<5 { await gate.check() }
        try await Task.sleep(for: .milliseconds(200))
        #expect(woken.value.load(ordering: .relaxed) == 0)
        store.up.store(true, ordering: .relaxed)
        await gate.check()
        for waiter in waiters { #expect(await waiter.value == .reachable) }
        #expect(health.report().checks["storage"] == "ok")
        // Once it answers, nobody waits at all.
        #expect(await gate.waitUntilReachable(until: far, control: TransferControl()) == .reachable)
    }

    @Test func aWaitEndsAtItsDeadlineOnAPauseACancelOrTheTasksCancellation() async throws {
        let store = Store()
        store.up.store(false, ordering: .relaxed)
        let gate = gate(store)
        await gate.check()
        let start = ContinuousClock.now
        #expect(await gate.waitUntilReachable(until: start.advanced(by: .milliseconds(300)), control: TransferControl()) == .deadline)
        #expect(start.duration(to: .now) >= .milliseconds(300))

        let far = ContinuousClock.now.advanced(by: .seconds(600))
        for interrupt in ["pause", "cancel"] {
            let control = TransferControl()
            let waiter = Task { await gate.waitUntilReachable(until: far, control: control) }
            try await Task.sleep(for: .milliseconds(100))
            if interrupt == "pause" { control.pause() } else { control.cancel() }
            #expect(await waiter.value == .interrupted, "\(interrupt)")
        }
        let waiter = Task { await gate.waitUntilReachable(until: far, control: TransferControl()) }
        try await Task.sleep(for: .milliseconds(100))
        waiter.cancel()
        _ = await waiter.value  // returns instead of waiting out the 600 s
        #expect(!gate.isReachable)
    }

    /// Seeded sequences of probe answers, waits and wake-ups: a waiter returns
    /// `.reachable` exactly when the store last answered, never hangs, and the
    /// gate's view is always the last probe's.
    @Test(arguments: 0..<40) func theGateAlwaysFollowsTheLastProbe(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let store = Store()
        let gate = gate(store, reuse: 0)
        for _ in 0..<30 {
            let up = random.next() % 3 != 0
            store.up.store(up, ordering: .relaxed)
            await gate.check()
            #expect(gate.isReachable == up)
            let wake = await gate.waitUntilReachable(until: ContinuousClock.now.advanced(by: .milliseconds(5)), control: TransferControl())
            #expect(wake == (up ? .reachable : .deadline))
        }
    }
}
