@_exported import FerryCore
import Foundation
import Logging

/// A trigger handler for S3 event notifications, in the spirit of
/// swift-aws-lambda-runtime: throw to fail the invocation (it is retried).
public protocol S3EventHandler: Sendable {
    func handle(_ event: S3Event, context: TriggerContext) async throws
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

    public init(requestId: String, handlerName: String, attempt: Int, deadline: Date, logger: Logger,
                environment: TriggerEnvironment) {
        self.requestId = requestId; self.handlerName = handlerName; self.attempt = attempt
        self.deadline = deadline; self.logger = logger; self.environment = environment
    }
}

/// Facts about the running Ferry that handlers and registrations may use.
public struct TriggerEnvironment: Sendable {
    /// The worker's data root (resolved); handlers write their local files under it.
    public var dataRoot: URL
    public var region: String

    public init(dataRoot: URL, region: String) {
        self.dataRoot = dataRoot
        self.region = region
    }
}
