import FerryCore
import FerryStorage
import Foundation
import Logging
import Synchronization
import FerryConcurrency

/// Runs transfers against an `ObjectStore`: multipart uploads and parallel
/// ranged downloads within the worker's limits, with progress, pause / resume /
/// cancel, per-request retries and a whole-transfer timeout. Local files stay
/// inside the data root.
public final class TransferEngine: Sendable {
    public struct Configuration: Sendable {
        /// Transfers running at once in this process.
        public var maxTransfers: Int = 8
        /// Defaults for every transfer; a request's `options` override them.
        public var defaults = TransferSettings()
        /// The store for requests with `options.accelerate` (S3 Transfer Acceleration);
        /// nil where the endpoint has none (such requests are refused).
        public var acceleratedStore: (any ObjectStore)?
        /// Fetches `https://` upload sources; nil disables them (the default).
        public var remoteSources: (any RemoteSourceReader)?
        /// Reads `kafka-chunks://` upload sources (the worker's Kafka); nil refuses them.
        public var chunks: (any ChunkFetcher)?
        public init() {}
    }

    public let store: any ObjectStore
    public let dataRoot: DataRoot
    public let configuration: Configuration
    private let slots: AsyncSemaphore
    /// For downloads that only check and flush (`TransferSlot.stepAside`).
    private let finishingPlaces: FinishingPlaces
    private let active = Mutex<[String: TransferControl]>([:])
    /// Multipart uploads transfers of this engine are using now.
    public let uploadsInUse = UploadsInUse()
    let logger: Logger

    public init(store: any ObjectStore, dataRoot: DataRoot, configuration: Configuration = .init(), logger: Logger) {
        self.store = store
        self.dataRoot = dataRoot
        self.configuration = configuration
        self.slots = AsyncSemaphore(limit: configuration.maxTransfers)
        self.finishingPlaces = FinishingPlaces(limit: configuration.maxTransfers)
        self.logger = logger
    }

    /// Transfers running now, each holding a slot.
    public var inFlight: Int { slots.inUse }

    /// Downloads that have all their bytes and gave their slot to the next
    /// transfer while their checks finish (at most `maxTransfers`).
    public var finishing: Int { finishingPlaces.inUse }

    /// The control of a running transfer, by request id.
    public func control(for id: String) -> TransferControl? { active.withLock { $0[id] } }

    /// Makes `control` findable through `control(for:)` while `body` runs, for
    /// a transfer that waits before it runs (for the store to answer): a
    /// rebalance or shutdown can hand it off, the admin API pause it.
    public func waiting<T: Sendable>(_ id: String, control: TransferControl, _ body: () async -> T) async -> T {
        active.withLock { $0[id] = control }
        defer { active.withLock { if $0[id] === control { $0[id] = nil } } }
        return await body()
    }

    /// Checks what can be checked before a transfer starts, so a request that
    /// cannot run is refused (and dead-lettered) rather than failing later:
    /// options, accelerate, and the source and destination against the data
    /// root and the remote-source policy. The transfer checks again when it runs.
    public func preflight(_ job: TransferJob) throws(FerryError) {
        let request = job.request
        _ = try configuration.defaults.applying(request.options)
        if request.options?.accelerate == true && configuration.acceleratedStore == nil {
            throw FerryError(.invalidRequest, "accelerate needs an AWS S3 endpoint (s3-accelerate); this worker's endpoint has none")
        }
        switch request.op {
        case .upload:
            guard let source = request.source else { throw FerryError(.invalidRequest, "upload needs a source") }
            let lowered = source.lowercased()
            if ChunkedSource.isChunked(source) {
                _ = try ChunkedSource(parsing: source)
                guard configuration.chunks != nil else {
                    throw FerryError(.forbiddenSource, "kafka-chunks sources need a worker that reads Kafka")
                }
            } else if lowered.hasPrefix("data:") {
                _ = try DataURI.decode(source, limit: configuration.defaults.maxDataURIBytes)
            } else if lowered.hasPrefix("https://") || lowered.hasPrefix("http://") {
                guard let fetcher = configuration.remoteSources else {
                    throw RemoteSourceRefusal.disabled(source)
                }
                if let refusal = fetcher.refusal(of: source) { throw refusal }
            } else {
                _ = try dataRoot.sourcePath(source, areas: job.localAreas)
            }
        case .download:
            guard let destination = request.destination else { throw FerryError(.invalidRequest, "download needs a destination") }
            try dataRoot.checkDestination(destination, areas: job.localAreas)
        case .copy:
            let source = try job.copySourceLocation()
            try ObjectLocation.checkAddress(bucket: source.bucket, key: source.key)
        case .delete:
            break
        }
    }

    /// Runs `job` once a transfer slot is free. `progress` sees bytes moved
    /// (called often, from transport threads). `control` pauses, resumes or
    /// cancels it; the engine also finds it by id through `control(for:)`.
    /// `journal` records progress so that a later run of the same transfer resumes.
    /// `logger` (default: the engine's, with the transfer id) carries the caller's context.
    /// `outageCheck` is asked when a storage request gets no answer, before it
    /// is retried: true (the store is down) ends the transfer with that failure
    /// at once, for the caller to wait for the store or stop.
    public func run(_ job: TransferJob, control: TransferControl = TransferControl(), journal: (any TransferJournal)? = nil,
                    logger runLogger: Logger? = nil, outageCheck: (any OutageCheck)? = nil,
                    progress: @escaping @Sendable (TransferProgress) -> Void = { _ in }) async throws(FerryError) -> TransferOutcome {
        let settings = try configuration.defaults.applying(job.request.options)
        var store = self.store
        if job.request.options?.accelerate == true {
            guard let accelerated = configuration.acceleratedStore else {
                throw FerryError(.invalidRequest, "accelerate needs an AWS S3 endpoint (s3-accelerate); this worker's endpoint has none")
            }
            store = accelerated
        }
        let id = job.request.id
        // Steerable from now on, while it waits for a slot too.
        active.withLock { $0[id] = control }
        defer { active.withLock { if $0[id] === control { $0[id] = nil } } }
        try await takeSlot(control)
        let slot = TransferSlot(slots: slots, places: finishingPlaces)
        defer { slot.release() }

        let run = TransferRun(job: job, settings: settings, control: control, store: store, dataRoot: dataRoot,
                              remoteSources: configuration.remoteSources, chunks: configuration.chunks,
                              journal: journal, outageCheck: outageCheck, uploadsInUse: uploadsInUse, slot: slot,
                              progress: progress, logger: runLogger ?? logger.with(transfer: id))
        control.meter.observe { [run] _ in run.report() }
        // The observer holds the run, the run the control, the control this meter: break the cycle at the end.
        defer { control.meter.stopObserving() }
        return try await Self.withTimeout(settings.timeoutSeconds, control: control, logger: runLogger ?? logger) { () async throws(FerryError) -> TransferOutcome in
            switch job.request.op {
            case .upload: return try await run.upload()
            case .download: return try await run.download()
            case .delete: return try await run.delete()
            case .copy: return try await run.copy()
            }
        }
    }

    /// Waits for a transfer slot as long as the transfer is running: a paused
    /// transfer waits for its resume without holding a slot, and a cancelled
    /// one leaves the queue at once with its cancel reason.
    private func takeSlot(_ control: TransferControl) async throws(FerryError) {
        while true {
            try await control.checkpoint()
            let slots = self.slots
            let acquired = await withTaskGroup(of: Bool?.self) { group in
                group.addTask { await slots.acquireUnlessCancelled() }
                group.addTask { await control.untilInterrupted(); return nil }
                var acquired = false
                if let first = await group.next(), first == true { acquired = true }
                group.cancelAll()
                while let more = await group.next() { if more == true { acquired = true } }
                return acquired
            }
            if acquired && control.state == .running { return }
            if acquired { slots.release() }
            // Paused, cancelled, or this task cancelled: the checkpoint waits or throws.
        }
    }

    /// Clean-up (aborting a multipart upload, removing a temp file) a timed-out
    /// transfer gets before its slot is freed regardless.
    public static let timeoutCleanupSeconds: Double = 30

    /// Runs `body` with a bound that really ends it: after `seconds` the
    /// transfer is cancelled with `TimedOut` and its own clean-up runs; if it
    /// has still not returned `timeoutCleanupSeconds` later (stuck in a call
    /// that cancellation cannot reach), this returns `TimedOut` anyway and the
    /// stuck work is left behind, logged, so the slot is never held for ever.
    static func withTimeout(_ seconds: Double, control: TransferControl, logger: Logger,
                            cleanupSeconds: Double = timeoutCleanupSeconds,
                            _ body: @escaping @Sendable () async throws(FerryError) -> TransferOutcome) async throws(FerryError) -> TransferOutcome {
        let first = FirstResult<Result<TransferOutcome, FerryError>>()
        let work = Task {
            do throws(FerryError) { first.offer(.success(try await body())) } catch { first.offer(.failure(error)) }
        }
        // Dispatch timers, not Task.sleep: almost every transfer ends long before its
        // timeout, and a cancelled sleep keeps its timer in memory until the deadline.
        let cleanup = Mutex<DeadlineTimer?>(nil)
        let timer = RunningTimeDeadline.start(seconds: seconds, control: control) {
            let reason = FerryError(.timedOut, "transfer did not finish within \(seconds.clampedInt()) s of running time")
            control.cancel(reason)
            let abandon = DeadlineTimer.start(after: cleanupSeconds) {
                if first.offer(.failure(reason)) {
                    logger.error("transfer still running \(cleanupSeconds.clampedInt()) s after its timeout; its slot is freed and the stuck work abandoned")
                }
            }
            cleanup.withLock { $0 = abandon }
        }
        defer {
            timer.cancel()
            cleanup.withLock { $0?.cancel() }
        }
        let result = await withTaskCancellationHandler {
            await first.value
        } onCancel: {
            // Cancelled (hand-off, shutdown): the same bound holds for the clean-up.
            work.cancel()
            let abandon = DeadlineTimer.start(after: cleanupSeconds) {
                if first.offer(.failure(control.cancellationReason ?? FerryError(.cancelled, "transfer cancelled"))) {
                    logger.error("cancelled transfer still running \(cleanupSeconds.clampedInt()) s later; its slot is freed and the stuck work abandoned")
                }
            }
            cleanup.withLock { $0 = abandon }
        }
        return try result.get()
    }
}

/// The first of several results offered from different tasks; later offers are ignored.
final class FirstResult<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var waiter: CheckedContinuation<Value, Never>?
    }
    private let state = Mutex(State())

    /// True when this offer was the first.
    @discardableResult
    func offer(_ value: Value) -> Bool {
        let waiter: CheckedContinuation<Value, Never>?? = state.withLock { s in
            guard s.value == nil else { return .none }
            s.value = value
            defer { s.waiter = nil }
            return .some(s.waiter)
        }
        guard case .some(let w) = waiter else { return false }
        w?.resume(returning: value)
        return true
    }

    var value: Value {
        get async {
            await withCheckedContinuation { continuation in
                let ready: Value? = state.withLock { s in
                    if let v = s.value { return v }
                    s.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }
}

extension Logger {
    func with(transfer id: String) -> Logger {
        var copy = self
        copy[metadataKey: "transfer"] = "\(id)"
        return copy
    }
}

/// Turns any error from a task group back into the `FerryError` it carries.
func ferryError(_ error: any Error) -> FerryError {
    if let e = error as? FerryError { return e }
    if error is CancellationError { return FerryError(.cancelled, "transfer cancelled") }
    return FerryError(.internalError, "\(error)")
}

/// The refusal of an http(s) source on a worker that fetches none, naming
/// the scheme the request used.
enum RemoteSourceRefusal {
    static func disabled(_ source: String) -> FerryError {
        let scheme = source.lowercased().hasPrefix("http://") ? "http" : "https"
        return FerryError(.forbiddenSource, "\(scheme):// sources are disabled on this worker (https:// ones can be enabled with --https-sources)")
    }
}
