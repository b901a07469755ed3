import FerryCore
import FerryEngine
import Logging
import Metrics
import Synchronization
import FerryConcurrency

/// Whether the object store answers, as this worker last saw it. A transfer
/// that failed because the store did not answer (a refused, reset or silent
/// connection; no credentials) waits here for it to come back and runs again,
/// instead of reporting `failed`: an outage of the store stops the worker's
/// intake (its slots wait) and fails nothing, unless it outlasts a transfer's
/// timeout. `/readyz` reports what the gate saw.
final class StorageGate: OutageCheck {
    typealias Probe = @Sendable () async throws(FerryError) -> Void

    private struct State {
        var reachable = true
        var downSince: ContinuousClock.Instant?
        var lastProbe: (at: ContinuousClock.Instant, reachable: Bool)?
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }
    private let state = Mutex(State())
    /// Transfers waiting in `waitUntilReachable` (the gauge's value).
    private let waiting = Atomic<Int>(0)
    private let probe: Probe
    /// The probe under way: checks made meanwhile take its answer (and its start).
    private let probes = SingleFlight<(answered: Bool, started: ContinuousClock.Instant)>()
    private let health: WorkerHealth
    private let logger: Logger
    /// A probe that got no answer this recently answers for a failed transfer
    /// too (a burst of failures sends one probe, not one each).
    let probeReuseSeconds: Double

    init(health: WorkerHealth, probeReuseSeconds: Double = 1, logger: Logger, probe: @escaping Probe) {
        self.health = health
        self.probeReuseSeconds = probeReuseSeconds
        self.logger = logger
        self.probe = probe
    }

    var isReachable: Bool { state.withLock { $0.reachable } }

    /// How often to probe: often while the store is down, so transfers resume soon after it returns.
    var probeInterval: Duration { isReachable ? .seconds(5) : .seconds(1) }

    /// Probes the store and records the answer; true when it answered. A
    /// check while a probe is under way takes that probe's answer: the
    /// parallel requests of a store that fell silent fail together, and they
    /// send one probe, not one each.
    @discardableResult
    func check() async -> Bool {
        await sharedProbe().answered
    }

    /// The probe under way, or a new one: its answer and when it began.
    private func sharedProbe() async -> (answered: Bool, started: ContinuousClock.Instant) {
        await probes.run { [self] in await probeOnce() }
    }

    private func probeOnce() async -> (answered: Bool, started: ContinuousClock.Instant) {
        let started = ContinuousClock.now
        do throws(FerryError) {
            try await probe()
            record(nil)
            return (true, started)
        } catch {
            record(error)
            return (false, started)
        }
    }

    /// After a transfer failed with `error`: true when the store does not
    /// answer (the transfer should wait for it), false when it does (the
    /// failure is the transfer's own and is reported).
    func confirmsOutage(_ error: FerryError) async -> Bool {
        guard error.isStoreNoAnswer else { return false }  // an answer, or a source's silence: the transfer's own failure
        let failed = ContinuousClock.now
        let reuse = probeReuseSeconds
        if let last = state.withLock({ $0.lastProbe }), !last.reachable, last.at.duration(to: failed) < .seconds(reuse) { return true }
        // An answer clears the store only from a probe begun after this failure: one begun
        // before (under way when the store went down, or just ended) says nothing of it, and
        // its answer once failed a transfer the store's outage had cut. The next probe, begun
        // after that one ended, is.
        for _ in 0..<2 {
            let probe = await sharedProbe()
            if !probe.answered { return true }
            if probe.started >= failed { return false }
        }
        return false
    }

    enum Wake: Equatable { case reachable, deadline, interrupted }

    /// Returns when the store answers again (at once if it does), `deadline`
    /// passes, the transfer is paused or cancelled, or the calling task is cancelled.
    func waitUntilReachable(until deadline: ContinuousClock.Instant, control: TransferControl) async -> Wake {
        guard !isReachable else { return .reachable }
        let gauge = Gauge(label: "ferry_transfers_waiting_for_storage")
        gauge.record(waiting.add(1, ordering: .relaxed).newValue)
        defer { gauge.record(waiting.add(-1, ordering: .relaxed).newValue) }
        return await withTaskGroup(of: Wake.self) { group in
            group.addTask { await self.reachable(); return .reachable }
            group.addTask {
                try? await Task.sleep(until: deadline, clock: .continuous)
                return .deadline
            }
            group.addTask { await control.untilInterrupted(); return .interrupted }
            let first = await group.next() ?? .interrupted
            group.cancelAll()
            return first
        }
    }

    private func reachable() async {
        let id = state.withLock { s in defer { s.nextWaiter += 1 }; return s.nextWaiter }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s in
                    if s.reachable || Task.isCancelled { return true }
                    s.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    private func record(_ error: FerryError?) {
        let now = ContinuousClock.now
        let answered = error == nil
        let (woken, wentDown, downFor): ([CheckedContinuation<Void, Never>], Bool, Duration?) = state.withLock { s in
            s.lastProbe = (now, answered)
            let was = s.reachable
            s.reachable = answered
            guard answered else {
                if was { s.downSince = now }
                return ([], was, nil)
            }
            defer { s.downSince = nil; s.waiters = [:] }
            return (Array(s.waiters.values), false, was ? nil : s.downSince.map { $0.duration(to: now) })
        }
        health.storage(reachable: answered, error: error.map { "\($0)" })
        if wentDown, let error {
            Counter(label: "ferry_storage_outages_total").increment()
            logger.warning("storage unreachable: \(error); transfers that need it wait for it (each up to its timeout), and so do new requests")
        }
        if let downFor {
            logger.notice("storage answers again after \(downFor.inSeconds.rounded().clampedInt()) s; \(woken.count) waiting transfer(s) resume")
        }
        woken.forEach { $0.resume() }
    }
}
