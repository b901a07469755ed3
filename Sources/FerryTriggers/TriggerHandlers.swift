@_exported import FerryCore
import FerryKafka
import FerryS3
import Foundation
import Logging

/// A trigger handler for S3 event notifications, in the spirit of
/// swift-aws-lambda-runtime: throw to fail the invocation (it is retried).
public protocol S3EventHandler: Sendable {
    func handle(_ event: S3Event, context: TriggerContext) async throws
}

/// A trigger handler for a table's stream records, like a Lambda function
/// behind a DynamoDB event source mapping. Throwing fails the whole batch;
/// with ReportBatchItemFailures, returning failed `eventID`s retries the batch
/// from the first of them.
public protocol StreamRecordHandler: Sendable {
    func handle(_ event: DynamoDBEvent, context: TriggerContext) async throws -> StreamBatchResponse
}

/// What a handler knows about its invocation.
public struct TriggerContext: Sendable {
    /// Unique per invocation, like Lambda's `awsRequestId`.
    public var requestId: String
    /// The registration's name.
    public var handlerName: String
    /// 1 for the first try, then 2, 3 on retries.
    public var attempt: Int
    /// The handler is cancelled at this time.
    public var deadline: Date
    public var logger: Logger
    public var environment: TriggerEnvironment
    /// Enqueues further transfers on `<prefix>.requests` (guarded against loops).
    public var transfers: TriggerTransfers
    /// Sends a message to any Kafka topic (nil outside the fleet, e.g. `ferry triggers test`).
    public var kafka: KafkaProducer?

    public init(requestId: String, handlerName: String, attempt: Int, deadline: Date, logger: Logger,
                environment: TriggerEnvironment, transfers: TriggerTransfers) {
        self.requestId = requestId; self.handlerName = handlerName; self.attempt = attempt
        self.deadline = deadline; self.logger = logger; self.environment = environment; self.transfers = transfers
    }

    /// Time left before the deadline, like Lambda's `getRemainingTimeInMillis`.
    public var remainingTime: TimeInterval { deadline.timeIntervalSinceNow }
}

/// Facts about the running Ferry that handlers and registrations may use.
public struct TriggerEnvironment: Sendable {
    /// The worker's data root (resolved), where producers' files are. A
    /// handler's own files belong in `outputDirectory`, which no request reaches.
    public var dataRoot: URL
    /// Ferry's own directory for handlers' files (the audit log, the object
    /// index), outside the data root: `<state dir>/trigger-output` by default.
    public var outputDirectory: URL
    public var region: String
    /// Maps a request's user key to its S3 key (the access-level prefix), as the workers do.
    public var prefixResolver: any PrefixResolver
    /// The storage the workers write to, for handlers that read objects (nil when not configured).
    public var objects: (any ObjectStore)?
    /// The worker's HTTP transport, for handlers that call out: sharing it keeps
    /// their requests inside the process's connection and memory limits.
    public var http: CurlTransport

    public init(dataRoot: URL, outputDirectory: URL, region: String, prefixResolver: any PrefixResolver = DefaultPrefixResolver(),
                objects: (any ObjectStore)? = nil, http: CurlTransport) {
        self.dataRoot = dataRoot
        self.outputDirectory = outputDirectory
        self.region = region
        self.prefixResolver = prefixResolver
        self.objects = objects
        self.http = http
    }
}
