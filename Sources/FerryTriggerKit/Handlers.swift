/// A handler for S3 event notifications, invoked asynchronously as Lambda
/// invokes a function for S3: return to succeed, throw to fail the attempt.
/// A failed attempt is retried as the registration's `AsyncDelivery` says,
/// then written to the dead-letter topic. Delivery is at least once, so a
/// handler may see an event again and should act on it idempotently.
public protocol S3EventHandler: Sendable {
    func handle(_ event: S3Event, context: TriggerContext) async throws
}

/// A handler for a table's stream records, invoked as Lambda invokes a
/// function behind a DynamoDB event source mapping: batches in order per
/// partition. Throwing fails the whole batch; with
/// `EventSourceMapping.reportBatchItemFailures`, the returned failed
/// `eventID`s make the batch retry from the first of them.
public protocol StreamRecordHandler: Sendable {
    func handle(_ event: DynamoDBEvent, context: TriggerContext) async throws -> StreamBatchResponse
}
