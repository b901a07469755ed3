import Foundation

/// What `<prefix>.triggers.dlq` receives when an invocation has failed for good:
/// the shape of Lambda's on-failure destination record.
public struct InvocationRecord: Sendable, Codable {
    public struct RequestContext: Sendable, Codable {
        public var requestId: String
        /// `ferry:trigger:<name>` in place of a function ARN.
        public var functionArn: String
        /// `RetriesExhausted`, `EventAgeExceeded` or `UndecodableEvent`.
        public var condition: String
        public var approximateInvokeCount: Int
    }

    public struct ResponseContext: Sendable, Codable {
        public var statusCode: Int
        public var executedVersion: String
        public var functionError: String
    }

    public struct ErrorPayload: Sendable, Codable {
        public var errorType: String
        public var errorMessage: String
    }

    public var version = "1.0"
    public var timestamp: String
    public var requestContext: RequestContext
    /// The event as it was delivered (raw JSON text when it could not be decoded).
    public var requestPayload: RequestPayload
    public var responseContext: ResponseContext
    public var responsePayload: ErrorPayload

    public enum RequestPayload: Sendable, Codable {
        case s3(S3Event)
        case raw(String)

        public func encode(to encoder: Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .s3(let event): try container.encode(event)
            case .raw(let text): try container.encode(text)
            }
        }

        public init(from decoder: Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let event = try? container.decode(S3Event.self) { self = .s3(event) } else { self = .raw(try container.decode(String.self)) }
        }
    }

    public init(requestId: String, triggerName: String, condition: String, invokeCount: Int,
                payload: RequestPayload, error: any Error) {
        timestamp = Timestamp.iso8601(Date())
        requestContext = RequestContext(requestId: requestId, functionArn: "ferry:trigger:\(triggerName)",
                                        condition: condition, approximateInvokeCount: invokeCount)
        requestPayload = payload
        responseContext = ResponseContext(statusCode: 200, executedVersion: "$LATEST", functionError: "Unhandled")
        responsePayload = ErrorPayload(errorType: String(describing: type(of: error)), errorMessage: "\(error)")
    }
}
