import FerryCore
import FerryTriggerKit
import FerryKafka
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
    /// Set when the payload was left out because the record would not fit a
    /// Kafka message (`requestPayload` is then empty).
    public var payloadOmitted: OmittedPayload?

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

/// What a stream trigger's on-failure destination receives for records it
/// gave up on: Lambda's record (`DDBStreamBatchInfo` says which records), plus
/// the records themselves and their Kafka position, so nothing is lost when
/// the stream topic's retention passes.
public struct StreamFailureRecord: Sendable, Codable {
    public struct BatchInfo: Sendable, Codable {
        public var shardId: String
        public var startSequenceNumber: String
        public var endSequenceNumber: String
        public var approximateArrivalOfFirstRecord: String
        public var approximateArrivalOfLastRecord: String
        public var batchSize: Int
        public var streamArn: String
    }

    public struct KafkaPosition: Sendable, Codable {
        public var topic: String
        public var partition: Int32
        public var firstOffset: Int64
        public var lastOffset: Int64
    }

    public var version = "1.0"
    public var timestamp: String
    public var requestContext: InvocationRecord.RequestContext
    public var responseContext: InvocationRecord.ResponseContext
    public var batchInfo: BatchInfo
    public var errorMessage: String
    public var records: [DynamoDBEvent.Record]
    /// Raw values of records that could not be decoded.
    public var undecodable: [String]?
    public var kafka: KafkaPosition
    /// Set when the records were left out because the record would not fit a
    /// Kafka message (`records` is then empty; `kafka` says where they are).
    public var payloadOmitted: OmittedPayload?

    enum CodingKeys: String, CodingKey {
        case version, timestamp, requestContext, responseContext, batchInfo = "DDBStreamBatchInfo", errorMessage, records, undecodable, kafka,
             payloadOmitted
    }

    init(trigger: String, condition: String, invokeCount: Int, items: [StreamMapping.Item], messages: [KafkaMessage] = [],
         error: any Error) {
        let all = items.map(\.message) + messages
        let records = items.map(\.record)
        func arrival(_ message: KafkaMessage?) -> String {
            Timestamp.iso8601(message?.queuedAt ?? Date())
        }
        timestamp = Timestamp.iso8601(Date())
        requestContext = .init(requestId: UUID().uuidString, functionArn: "ferry:trigger:\(trigger)", condition: condition,
                               approximateInvokeCount: invokeCount)
        responseContext = .init(statusCode: 200, executedVersion: "$LATEST", functionError: "Unhandled")
        batchInfo = BatchInfo(shardId: all.first.map { "\($0.topic)/\($0.partition)" } ?? "-",
                              startSequenceNumber: records.first?.dynamodb.sequenceNumber ?? "",
                              endSequenceNumber: records.last?.dynamodb.sequenceNumber ?? "",
                              approximateArrivalOfFirstRecord: arrival(all.first), approximateArrivalOfLastRecord: arrival(all.last),
                              batchSize: all.count, streamArn: records.first?.eventSourceARN ?? "")
        errorMessage = "\(error)"
        self.records = records
        undecodable = messages.isEmpty ? nil : messages.map { String(decoding: $0.value, as: UTF8.self) }
        kafka = KafkaPosition(topic: all.first?.topic ?? "", partition: all.first?.partition ?? -1,
                              firstOffset: all.map(\.offset).min() ?? -1, lastOffset: all.map(\.offset).max() ?? -1)
    }
}
