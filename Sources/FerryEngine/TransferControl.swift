import FerryCore
import FerryStorage
import Synchronization

/// Pause, resume and cancel for one transfer, from before it starts until it
/// ends. Pausing stops every byte: requests in flight are aborted (a single
/// PUT or GET starts again on resume, a part is sent again) and nothing new
/// starts, while what the transfer has done is kept (a multipart upload keeps
/// its upload id and completed parts, a download its ranges on disk); resuming
/// continues from there; cancelling aborts requests in flight, and the engine
/// aborts the multipart upload and removes partial files. The engine's
/// timeout counts only the time the transfer is not paused.
public final class TransferControl: Sendable {
    public enum State: String, Sendable { case running, paused, cancelled }

    private struct Inner {
        var state: State = .running
        var reason: FerryError?
        var handedOff = false
        /// Waiting in `checkpoint` for a resume (or their task's cancellation).
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        /// Woken when the state leaves `running` (or their task is cancelled).
        var interruptWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var observers: [UInt64: @Sendable (State) -> Void] = [:]
        var nextId: UInt64 = 0
    }
    private let inner = Mutex(Inner())
    /// Aborts the transfer's requests in flight on cancel.
    public let meter: TransferMeter
    private let onChange: @Sendable (State) -> Void

    public init(meter: TransferMeter = TransferMeter(), onChange: @escaping @Sendable (State) -> Void = { _ in }) {
        self.meter = meter
        self.onChange = onChange
    }

    public var state: State { inner.withLock { $0.state } }

    /// Returns false when the transfer is not running.
    @discardableResult
    public func pause() -> Bool { transition(from: .running, to: .paused) }

    /// Returns false when the transfer is not paused.
    @discardableResult
    public func resume() -> Bool { transition(from: .paused, to: .running) }

    /// Stops the transfer for good; `reason` defaults to `Cancelled`.
    public func cancel(_ reason: FerryError = FerryError(.cancelled, "transfer cancelled")) {
        let woken: (waiters: [CheckedContinuation<Void, Never>], interrupted: [CheckedContinuation<Void, Never>],
                    observers: [@Sendable (State) -> Void])? = inner.withLock { i in
            guard i.state != .cancelled else { return nil }
            i.state = .cancelled
            i.reason = reason
            defer { i.waiters = [:]; i.interruptWaiters = [:] }
            return (Array(i.waiters.values), Array(i.interruptWaiters.values), Array(i.observers.values))
        }
        guard let woken else { return }
        meter.abort()
        woken.waiters.forEach { $0.resume() }
        woken.interrupted.forEach { $0.resume() }
        woken.observers.forEach { $0(.cancelled) }
        onChange(.cancelled)
    }

    /// Returns once the transfer is paused or cancelled (at once if it is), or
    /// when the calling task is cancelled.
    public func untilInterrupted() async {
        let id = inner.withLock { i in defer { i.nextId += 1 }; return i.nextId }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = inner.withLock { i in
                    if i.state != .running || Task.isCancelled { return true }
                    i.interruptWaiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            inner.withLock { $0.interruptWaiters.removeValue(forKey: id) }?.resume()
        }
    }

    /// Calls `observer` after every state change until removed (the engine's
    /// timeout stops counting while paused).
    func addObserver(_ observer: @escaping @Sendable (State) -> Void) -> UInt64 {
        inner.withLock { i in
            defer { i.nextId += 1 }
            i.observers[i.nextId] = observer
            return i.nextId
        }
    }

    func removeObserver(_ id: UInt64) {
        _ = inner.withLock { $0.observers.removeValue(forKey: id) }
    }

    /// Stops the transfer so that another run can continue it: unlike `cancel`,
    /// the multipart upload and a download's temp file are kept (worker
    /// shutdown, partition revoked in a rebalance).
    public func handOff(_ why: String) {
        inner.withLock { i in if i.state != .cancelled { i.handedOff = true } }
        cancel(FerryError(.cancelled, "handed off: \(why)"))
    }

    /// True when the transfer stopped by `handOff`: its progress is kept for whoever resumes it.
    public var isHandedOff: Bool { inner.withLock { $0.handedOff } }

    /// Waits while paused; throws the cancel reason once cancelled. A caller
    /// whose task is cancelled goes no further, paused or not (its work is
    /// ending: a sibling part failed), and throws `Cancelled`: the one place
    /// that tells a cancelled task from a pause, for the loops that send a
    /// request again after a pause or wait again for a slot.
    public func checkpoint() async throws(FerryError) {
        while true {
            if let reason = inner.withLock({ $0.state == .cancelled ? $0.reason : nil }) { throw reason }
            if Task.isCancelled { throw FerryError(.cancelled, "stopped: the transfer's work is ending") }
            let mustWait = inner.withLock { $0.state == .paused }
            guard mustWait else { return }
            let id = inner.withLock { i in defer { i.nextId += 1 }; return i.nextId }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let stillPaused = inner.withLock { i in
                        guard i.state == .paused, !Task.isCancelled else { return false }
                        i.waiters[id] = continuation
                        return true
                    }
                    if !stillPaused { continuation.resume() }
                }
            } onCancel: {
                inner.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
            }
        }
    }

    /// The error to report when the transfer stopped because it was cancelled.
    var cancellationReason: FerryError? { inner.withLock { $0.state == .cancelled ? $0.reason : nil } }

    private func transition(from: State, to: State) -> Bool {
        let woken: (waiters: [CheckedContinuation<Void, Never>], interrupted: [CheckedContinuation<Void, Never>],
                    observers: [@Sendable (State) -> Void])? = inner.withLock { i in
            guard i.state == from else { return nil }
            i.state = to
            let waiters = to == .running ? Array(i.waiters.values) : []
            let interrupted = to != .running ? Array(i.interruptWaiters.values) : []
            if to == .running { i.waiters = [:] } else { i.interruptWaiters = [:] }
            return (waiters, interrupted, Array(i.observers.values))
        }
        guard let woken else { return false }
        woken.waiters.forEach { $0.resume() }
        woken.interrupted.forEach { $0.resume() }
        woken.observers.forEach { $0(to) }
        onChange(to)
        return true
    }
}
