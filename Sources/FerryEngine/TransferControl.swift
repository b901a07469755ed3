import FerryCore
import FerryS3
import Synchronization

/// Pause, resume and cancel for one running transfer. Pausing stops new parts
/// from starting (parts in flight finish) and keeps what the transfer has done
/// (a multipart upload keeps its upload id and completed parts); resuming
/// continues from there; cancelling aborts requests in flight, and the engine
/// aborts the multipart upload and removes partial files.
public final class TransferControl: Sendable {
    public enum State: String, Sendable { case running, paused, cancelled }

    private struct Inner {
        var state: State = .running
        var reason: FerryError?
        var handedOff = false
        var waiters: [CheckedContinuation<Void, Never>] = []
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
        let waiters: [CheckedContinuation<Void, Never>]? = inner.withLock { i in
            guard i.state != .cancelled else { return nil }
            i.state = .cancelled
            i.reason = reason
            defer { i.waiters = [] }
            return i.waiters
        }
        guard let waiters else { return }
        meter.abort()
        waiters.forEach { $0.resume() }
        onChange(.cancelled)
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

    /// Waits while paused; throws the cancel reason once cancelled.
    public func checkpoint() async throws(FerryError) {
        while true {
            if let reason = inner.withLock({ $0.state == .cancelled ? $0.reason : nil }) { throw reason }
            let mustWait = inner.withLock { $0.state == .paused }
            guard mustWait else { return }
            await withCheckedContinuation { continuation in
                let stillPaused = inner.withLock { i in
                    guard i.state == .paused else { return false }
                    i.waiters.append(continuation)
                    return true
                }
                if !stillPaused { continuation.resume() }
            }
        }
    }

    /// The error to report when the transfer stopped because it was cancelled.
    var cancellationReason: FerryError? { inner.withLock { $0.state == .cancelled ? $0.reason : nil } }

    private func transition(from: State, to: State) -> Bool {
        let waiters: [CheckedContinuation<Void, Never>]? = inner.withLock { i in
            guard i.state == from else { return nil }
            i.state = to
            defer { if to == .running { i.waiters = [] } }
            return to == .running ? i.waiters : []
        }
        guard let waiters else { return false }
        waiters.forEach { $0.resume() }
        onChange(to)
        return true
    }
}
