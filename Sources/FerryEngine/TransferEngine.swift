import FerryCore
import FerryS3
import Foundation
import Logging
import Synchronization

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
        public var remoteSources: RemoteSourceFetcher?
        public init() {}
    }

    public let store: any ObjectStore
    public let dataRoot: DataRoot
    public let configuration: Configuration
    private let slots: AsyncSemaphore
    private let active = Mutex<[String: TransferControl]>([:])
    /// Multipart uploads transfers of this engine are using now.
    public let uploadsInUse = UploadsInUse()
    let logger: Logger

    public init(store: any ObjectStore, dataRoot: DataRoot, configuration: Configuration = .init(), logger: Logger) {
        self.store = store
        self.dataRoot = dataRoot
        self.configuration = configuration
        self.slots = AsyncSemaphore(limit: configuration.maxTransfers)
        self.logger = logger
    }

    /// Transfers running now.
    public var inFlight: Int { slots.inUse }

    /// The control of a running transfer, by request id.
    public func control(for id: String) -> TransferControl? { active.withLock { $0[id] } }


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
            if lowered.hasPrefix("data:") {
                _ = try DataURI.decode(source, limit: configuration.defaults.maxDataURIBytes)
            } else if lowered.hasPrefix("https://") || lowered.hasPrefix("http://") {
                guard let fetcher = configuration.remoteSources else {
                    throw FerryError(.forbiddenSource, "https:// sources are disabled on this worker (enable them with --https-sources)")
                }
                guard let url = URLComponents(string: source) else { throw FerryError(.invalidRequest, "source is not a valid URL") }
                if let refusal = fetcher.policy.refusal(of: url) { throw refusal }
            } else {
                _ = try dataRoot.sourcePath(source)
            }
        case .download:
            guard let destination = request.destination else { throw FerryError(.invalidRequest, "download needs a destination") }
            try dataRoot.checkDestination(destination)
        case .copy:
            guard let source = request.source else { throw FerryError(.invalidRequest, "copy needs a source s3://bucket/key") }
            _ = try ObjectLocation(s3URI: source)
        case .delete:
            break
        }
    }

    /// Runs `job` once a transfer slot is free. `progress` sees bytes moved
    /// (called often, from transport threads). `control` pauses, resumes or
    /// cancels it; the engine also finds it by id through `control(for:)`.
    /// `journal` records progress so that a later run of the same transfer resumes.
    /// `logger` (default: the engine's, with the transfer id) carries the caller's context.
    public func run(_ job: TransferJob, control: TransferControl = TransferControl(), journal: (any TransferJournal)? = nil,
                    logger runLogger: Logger? = nil,
                    progress: @escaping @Sendable (TransferProgress) -> Void = { _ in }) async throws(FerryError) -> TransferOutcome {
        let settings = try configuration.defaults.applying(job.request.options)
        var store = self.store
        if job.request.options?.accelerate == true {
            guard let accelerated = configuration.acceleratedStore else {
                throw FerryError(.invalidRequest, "accelerate needs an AWS S3 endpoint (s3-accelerate); this worker's endpoint has none")
            }
            store = accelerated
        }
        await slots.acquire()
        defer { slots.release() }
        let id = job.request.id
        active.withLock { $0[id] = control }
        defer { active.withLock { if $0[id] === control { $0[id] = nil } } }

        let run = TransferRun(job: job, settings: settings, control: control, store: store, dataRoot: dataRoot,
                              remoteSources: configuration.remoteSources, journal: journal, uploadsInUse: uploadsInUse,
                              progress: progress, logger: runLogger ?? logger.with(transfer: id))
        control.meter.observe { [run] _ in run.report() }
        return try await Self.withTimeout(settings.timeoutSeconds, control: control) { () async throws(FerryError) -> TransferOutcome in
            switch job.request.op {
            case .upload: return try await run.upload()
            case .download: return try await run.download()
            case .delete: return try await run.delete()
            case .copy: return try await run.copy()
            }
        }
    }

    /// Runs `body`; after `seconds` the transfer is cancelled with `TimedOut`
    /// and the body's own clean-up (abort, temp-file removal) still runs.
    static func withTimeout(_ seconds: Double, control: TransferControl,
                            _ body: @escaping @Sendable () async throws(FerryError) -> TransferOutcome) async throws(FerryError) -> TransferOutcome {
        let timer = Task {
            try await Task.sleep(for: .seconds(seconds))
            control.cancel(FerryError(.timedOut, "transfer did not finish within \(Int(seconds)) s"))
        }
        defer { timer.cancel() }
        return try await body()
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
