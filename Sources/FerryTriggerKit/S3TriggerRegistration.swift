import FerryCore
/// One S3 trigger: which events reach which handler, and how delivery behaves.
public struct S3TriggerRegistration: Sendable {
    /// Unique name, used in logs, the DLQ record and `ferry triggers list`.
    public var name: String
    /// The S3 event types that reach the handler (`ObjectCreated:*`, `ObjectRemoved:Delete`, …).
    public var events: [EventTypePattern]
    /// Key filters, on the decoded key, as S3's `prefix` / `suffix` filter rules.
    public var prefix: String
    public var suffix: String
    /// Retries, timeout, event age and concurrency, as Lambda's async invocation.
    public var delivery: AsyncDelivery
    /// What runs for each event.
    public var handler: any S3EventHandler
    /// For catch-all examples: instead of failing start-up when it overlaps a
    /// trigger registered before it (targets declared in configuration come
    /// first), this one is left out, with the reason in `ferry triggers list`.
    public var yieldsToOverlaps: Bool

    public init(name: String, events: [EventTypePattern], prefix: String = "", suffix: String = "",
                delivery: AsyncDelivery = AsyncDelivery(), yieldsToOverlaps: Bool = false, handler: any S3EventHandler) {
        self.name = name; self.events = events; self.prefix = prefix; self.suffix = suffix
        self.delivery = delivery; self.yieldsToOverlaps = yieldsToOverlaps; self.handler = handler
    }

    /// Whether this trigger receives `record`.
    public func matches(_ record: S3Event.Record) -> Bool {
        matches(eventName: record.eventName, key: record.s3.object.decodedKey)
    }

    /// Prefix and suffix by bytes, as S3's filter rules compare them.
    public func matches(eventName: String, key: String) -> Bool {
        events.contains { $0.matches(eventName) } && key.hasBytePrefix(prefix) && key.hasByteSuffix(suffix)
    }
}

/// Lambda's asynchronous-invocation settings.
public struct AsyncDelivery: Sendable, Hashable {
    /// Retries after a failed invocation: 0, 1 or 2 (Lambda's range).
    public var maximumRetryAttempts: Int
    /// Wait before the first retry; doubled for each further one.
    public var retryDelaySeconds: Double
    /// An invocation running longer is cancelled and counts as failed.
    public var timeoutSeconds: Double
    /// An event older than this (counted from when it entered `<prefix>.events`)
    /// is not invoked again but dead-lettered with `EventAgeExceeded` (Lambda:
    /// 60 s – 6 h, default 6 h).
    public var maximumEventAgeSeconds: Double
    /// At most this many invocations of the handler at once (Lambda's reserved
    /// concurrency); nil: one per partition of `<prefix>.events`.
    public var maximumConcurrency: Int?

    public init(maximumRetryAttempts: Int = 2, retryDelaySeconds: Double = 1, timeoutSeconds: Double = 30,
                maximumEventAgeSeconds: Double = 21_600, maximumConcurrency: Int? = nil) {
        self.maximumRetryAttempts = min(2, max(0, maximumRetryAttempts))
        self.retryDelaySeconds = retryDelaySeconds
        self.timeoutSeconds = timeoutSeconds
        self.maximumEventAgeSeconds = maximumEventAgeSeconds
        self.maximumConcurrency = maximumConcurrency.map { max(1, $0) }
    }
}
