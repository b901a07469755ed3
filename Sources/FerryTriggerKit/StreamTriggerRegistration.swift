import FerryCore
/// One stream trigger: a table's stream, the view type the handler sees, and
/// an event source mapping's settings.
public struct StreamTriggerRegistration: Sendable {
    /// Unique name; also names the mapping's consumer group (`<prefix>-triggers.<name>`).
    public var name: String
    /// `objects`, `transfers`, or a record table declared on the workers (`--table`).
    public var table: String
    /// Which images the records carry (keys only, new, old, or both).
    public var viewType: StreamViewType
    /// Batching, retries, filters and destinations, as a Lambda event source mapping.
    public var mapping: EventSourceMapping
    /// What runs for each batch.
    public var handler: any StreamRecordHandler

    /// Ferry's own tables; record tables declared on the workers come beside them.
    public static let tables = ["objects", "transfers"]

    public init(name: String, table: String, viewType: StreamViewType = .newAndOldImages,
                mapping: EventSourceMapping = EventSourceMapping(), handler: any StreamRecordHandler) {
        self.name = name; self.table = table; self.viewType = viewType; self.mapping = mapping; self.handler = handler
    }

    /// Whether `record` comes from this trigger's table and passes its filters.
    public func matches(_ record: DynamoDBEvent.Record) -> Bool {
        record.tableName == table && mapping.filterCriteria.matches(record)
    }
}

/// Lambda's event source mapping settings for a stream.
public struct EventSourceMapping: Sendable {
    /// Records per invocation at most (Lambda: 1–10,000, default 100).
    public var batchSize: Int
    /// How long to gather records before invoking with fewer than `batchSize` (Lambda: 0–300 s).
    public var maximumBatchingWindowSeconds: Double
    /// Retries of a failing batch before it goes to the on-failure destination; -1: until the records expire.
    public var maximumRetryAttempts: Int
    /// Records older than this go to the on-failure destination unprocessed; -1: no limit.
    public var maximumRecordAgeSeconds: Double
    /// Split a failing batch in two and retry the halves (until single records fail).
    public var bisectBatchOnFunctionError: Bool
    /// Honour the handler's `batchItemFailures`: checkpoint before the first failed record and retry from it.
    public var reportBatchItemFailures: Bool
    /// Kafka topic for the batch that could not be processed; nil: `<prefix>.triggers.dlq`.
    public var onFailureDestination: String?
    /// Only records matching one of these patterns reach the handler; the others are skipped.
    public var filterCriteria: FilterCriteria
    /// Wait before the first retry; doubled for each further one, at most 30 s (or this, when longer).
    public var retryDelaySeconds: Double
    /// An invocation running longer is cancelled and counts as failed.
    public var timeoutSeconds: Double
    /// At most this many invocations at once across partitions; nil: one per partition.
    public var maximumConcurrency: Int?
    /// Where a new mapping starts reading (its consumer group has no position yet).
    public var startingPosition: StartingPosition

    public init(batchSize: Int = 100, maximumBatchingWindowSeconds: Double = 0, maximumRetryAttempts: Int = -1,
                maximumRecordAgeSeconds: Double = -1, bisectBatchOnFunctionError: Bool = false,
                reportBatchItemFailures: Bool = false, onFailureDestination: String? = nil,
                filterCriteria: FilterCriteria = FilterCriteria(), retryDelaySeconds: Double = 1,
                timeoutSeconds: Double = 30, maximumConcurrency: Int? = nil, startingPosition: StartingPosition = .trimHorizon) {
        self.startingPosition = startingPosition
        self.batchSize = min(10_000, max(1, batchSize))
        self.maximumBatchingWindowSeconds = min(300, max(0, maximumBatchingWindowSeconds))
        self.maximumRetryAttempts = max(-1, maximumRetryAttempts)
        self.maximumRecordAgeSeconds = maximumRecordAgeSeconds
        self.bisectBatchOnFunctionError = bisectBatchOnFunctionError
        self.reportBatchItemFailures = reportBatchItemFailures
        self.onFailureDestination = onFailureDestination
        self.filterCriteria = filterCriteria
        self.retryDelaySeconds = retryDelaySeconds
        self.timeoutSeconds = timeoutSeconds
        self.maximumConcurrency = maximumConcurrency.map { max(1, $0) }
    }
}

/// Lambda's `StartingPosition` for a DynamoDB stream: where a new event source
/// mapping begins. It applies once, when the mapping's consumer group has no
/// position; from then on the mapping goes on from where it got to, across
/// restarts and whichever worker runs it.
public enum StartingPosition: String, Sendable, CaseIterable {
    /// Every record the stream topic still holds (Kafka's retention).
    case trimHorizon = "TRIM_HORIZON"
    /// Only records written after the mapping first started (its position
    /// is pinned to the topic's end then, so records written while no worker
    /// runs it are still delivered later).
    case latest = "LATEST"
}
