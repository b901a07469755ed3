import FerryCore
import FerryEngine
import Logging

extension RequestPipeline {
    /// Runs the transfer; when it fails because the store does not answer (or
    /// the store is already known to be down), waits for the store and runs it
    /// again, continuing from what it stored (the journal, the object's
    /// transfer marker). The waits end with the transfer's timeout counted
    /// from now: then it fails with the store's last error. `extraRuns` counts
    /// the runs after the first.
    func runThroughOutages(_ job: TransferJob, control: TransferControl, log: Logger,
                           progress: @escaping @Sendable (TransferProgress) -> Void) async throws(FerryError)
        -> (outcome: TransferOutcome, extraRuns: Int) {
        // As the engine applies it: the request's option (checked by the decoder) or the worker's default.
        let timeout = job.request.options?.timeoutSeconds ?? engine.configuration.defaults.timeoutSeconds
        let deadline = ContinuousClock.now.advanced(by: .seconds(clamping: timeout))
        var extraRuns = 0
        var lastOutage: FerryError?
        while true {
            if !storage.isReachable, control.state == .running {
                log.info("waits for storage before it runs (up to \(timeout.clampedInt()) s from its start)")
                let woke = await engine.waiting(job.request.id, control: control) {
                    await storage.waitUntilReachable(until: deadline, control: control)
                }
                if Task.isCancelled { throw FerryError(.cancelled, "worker stopping while the transfer waited for storage") }
                if woke == .deadline, let lastOutage {
                    throw FerryError(lastOutage.code, "storage unreachable for the transfer's timeout (\(timeout.clampedInt()) s): \(lastOutage.message)")
                }
            }
            do throws(FerryError) {
                // A request that gets no answer while the probe gets none either ends the run
                // at once, without its retries: it waits here instead.
                return (try await engine.run(job, control: control, journal: WorkerJournal(state: state, logger: log),
                                             logger: log, outageCheck: storage, progress: progress), extraRuns)
            } catch {
                guard !Task.isCancelled, !control.isHandedOff, control.state != .cancelled,
                      await storage.confirmsOutage(error) else { throw error }
                guard ContinuousClock.now < deadline else {
                    throw FerryError(error.code, "storage unreachable for the transfer's timeout (\(timeout.clampedInt()) s): \(error.message)")
                }
                log.warning("\(job.request.op.rawValue) stopped: storage unreachable (\(error)); it runs again when storage answers")
                lastOutage = error
                extraRuns += 1
                // The next run counts what it finds stored again.
                control.meter.add(-control.meter.value)
            }
        }
    }
}
