import FerryCore
import FerryEngine
import Synchronization
import FerryConcurrency

/// Stops a recursive copy once the store gives no answer. A copy that failed
/// without one is followed by a probe of the store; if that gets none either,
/// the copies running are cancelled (their temp files removed, one abort
/// request sent for a multipart upload) and no more start. Without it, a copy of many
/// files to a dead store failed each file after its retries: hours for a store
/// that takes connections and never answers, where every request waits out
/// the 30 s low-speed cut-off.
final class StorageBreaker: OutageCheck {
    typealias Probe = @Sendable () async throws(FerryError) -> Void
    private struct State {
        var reason: FerryError?
        var running: [ObjectIdentifier: TransferControl] = [:]
    }
    private let state = Mutex(State())
    private let probe: Probe
    /// The probe under way: copies failing meanwhile take its answer.
    private let probes = SingleFlight<FerryError?>()

    init(probe: @escaping Probe) { self.probe = probe }

    /// Why the copy stopped: the failure the probe confirmed. Nil while it runs.
    var reason: FerryError? { state.withLock { $0.reason } }

    /// A control for the next copy, nil once the breaker has tripped (the copy is not started).
    func enroll() -> TransferControl? {
        state.withLock { s in
            guard s.reason == nil else { return nil }
            let control = TransferControl()
            s.running[ObjectIdentifier(control)] = control
            return control
        }
    }

    func release(_ control: TransferControl) {
        _ = state.withLock { $0.running.removeValue(forKey: ObjectIdentifier(control)) }
    }

    /// After a copy failed with `error`: true when the store gives no answer
    /// (the breaker trips, the running copies stop), false when the failure is
    /// the copy's own. Once tripped, every later failure is the stop's. The
    /// engine asks it too, before it retries a copy's request that got no answer.
    func confirmsOutage(_ error: FerryError) async -> Bool {
        guard reason == nil else { return true }
        guard error.isStoreNoAnswer else { return false }
        let silence = await probes.run { [probe] () async -> FerryError? in
            do throws(FerryError) {
                try await probe()
                return nil
            } catch {
                return error
            }
        }
        guard let silence else { return false }
        let stopping: [TransferControl] = state.withLock { s in
            guard s.reason == nil else { return [] }
            s.reason = silence
            return Array(s.running.values)
        }
        let stop = FerryError(.cancelled, "copy stopped: the store gives no answer")
        for control in stopping { control.cancel(stop) }
        return true
    }
}
