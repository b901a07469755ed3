import FerryCore
import Foundation
import Logging

/// What a handler knows about one invocation, and what it may do beyond
/// reading its event. Plain values, like a Lambda context: nothing here is
/// a Kafka, curl or storage type.
public struct TriggerContext: Sendable {
    /// Unique per invocation, like Lambda's `awsRequestId`.
    public var requestId: String
    /// The registration's name.
    public var handlerName: String
    /// 1 for the first try, then 2, 3 on retries.
    public var attempt: Int
    /// When the invocation is cancelled, on the monotonic clock (a change of
    /// the wall clock does not move it).
    public var deadline: ContinuousClock.Instant
    public var logger: Logger
    /// The W3C `traceparent` of the work that caused this invocation, when
    /// the runtime knows one (nil otherwise).
    public var traceParent: String?
    /// Facts about the running Ferry, and its storage and HTTP for handlers.
    public var environment: TriggerEnvironment
    /// Enqueues transfers (writes objects) on `<prefix>.requests`, guarded against loops.
    public var transfers: TriggerTransfers
    /// Sends a message to a topic; nil where no broker is reachable (`ferry triggers test` without `--brokers`).
    public var messages: (any MessageSender)?

    public init(requestId: String, handlerName: String, attempt: Int, deadline: ContinuousClock.Instant, logger: Logger,
                traceParent: String? = nil, environment: TriggerEnvironment, transfers: TriggerTransfers,
                messages: (any MessageSender)? = nil) {
        self.requestId = requestId; self.handlerName = handlerName; self.attempt = attempt
        self.deadline = deadline; self.logger = logger; self.traceParent = traceParent
        self.environment = environment; self.transfers = transfers; self.messages = messages
    }

    /// Time left before the deadline, like Lambda's `getRemainingTimeInMillis`.
    public var remainingTime: Duration { ContinuousClock.now.duration(to: deadline) }

    /// The storage the workers write to, to read objects (nil when none is configured).
    public var objects: (any ObjectReader)? { environment.objects }
}

/// Facts about the running Ferry that handlers and registrations may use.
public struct TriggerEnvironment: Sendable {
    /// The worker's data root (resolved), where producers' files are. A
    /// handler's own files belong in `outputDirectory`, which no request reaches.
    public var dataRoot: URL
    /// Ferry's directory for handlers' own files (an audit log, an index),
    /// outside the data root: `<state dir>/trigger-output` by default.
    public var outputDirectory: URL
    public var region: String
    /// Maps a request's user key to its S3 key (the access-level prefix), as the workers do.
    public var prefixResolver: any PrefixResolver
    /// Reads objects from the storage the workers write to (nil when not configured).
    public var objects: (any ObjectReader)?
    /// Makes HTTP requests within the process's connection and memory limits (nil when not provided).
    public var http: (any HTTPSender)?
    /// Runs blocking work (file I/O, blocking C calls) off the threads that run handlers.
    public var blocking: any BlockingWork

    public init(dataRoot: URL, outputDirectory: URL, region: String, prefixResolver: any PrefixResolver = DefaultPrefixResolver(),
                objects: (any ObjectReader)? = nil, http: (any HTTPSender)? = nil, blocking: any BlockingWork = InlineBlockingWork()) {
        self.dataRoot = dataRoot
        self.outputDirectory = outputDirectory
        self.region = region
        self.prefixResolver = prefixResolver
        self.objects = objects
        self.http = http
        self.blocking = blocking
    }
}
