import FerryKafka
import FerryCore
import FerryTriggerKit
@testable import FerryTriggers
import Foundation
import Testing

/// The records written when delivery gives up, against the shapes Lambda
/// documents for on-failure destinations (asynchronous invocation, and
/// DynamoDB-stream event source mappings).
@Suite struct FailureRecordShapeTests {
    func json<T: Encodable>(_ value: T) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: JSONEncoder().encode(value)) as! [String: Any]
    }

    @Test func asyncInvocationRecord() throws {
        let event = TriggerDispatcherTests().event(key: "a")
        let record = InvocationRecord(requestId: "r-1", triggerName: "thumbs", condition: "RetriesExhausted", invokeCount: 3,
                                      payload: .s3(event), error: TriggerTimeout(seconds: 3))
        let object = try json(record)
        #expect(Set(object.keys) == ["version", "timestamp", "requestContext", "requestPayload", "responseContext", "responsePayload"])
        #expect(object["version"] as? String == "1.0")
        let request = object["requestContext"] as! [String: Any]
        #expect(Set(request.keys) == ["requestId", "functionArn", "condition", "approximateInvokeCount"])
        let response = object["responseContext"] as! [String: Any]
        #expect(Set(response.keys) == ["statusCode", "executedVersion", "functionError"])
        #expect(response["functionError"] as? String == "Unhandled")
        #expect(Set((object["responsePayload"] as! [String: Any]).keys) == ["errorType", "errorMessage"])
        // The payload is the event itself, decodable as such.
        let payload = try JSONDecoder().decode(S3Event.self, from: JSONSerialization.data(withJSONObject: object["requestPayload"]!))
        #expect(payload == event)
    }

    @Test func streamFailureRecord() throws {
        let records = (0..<2).map { StreamDeliveryTests.record("k", $0) }
        let items = records.enumerated().map { i, record in
            StreamMapping.Item(message: KafkaMessage(topic: "ferry.streams", partition: 3, offset: 40 + Int64(i), key: nil,
                                                     value: [], headers: [], timestampMs: 1_700_000_000_000), record: record)
        }
        let failure = StreamFailureRecord(trigger: "index", condition: "RetryAttemptsExhausted", invokeCount: 4, items: items,
                                          error: StreamDeliveryTests.Planned())
        let object = try json(failure)
        // Lambda's keys, plus Ferry's: the records themselves, the error, their Kafka position.
        #expect(Set(object.keys) == ["version", "timestamp", "requestContext", "responseContext", "DDBStreamBatchInfo",
                                     "errorMessage", "records", "kafka"])
        let info = object["DDBStreamBatchInfo"] as! [String: Any]
        #expect(Set(info.keys) == ["shardId", "startSequenceNumber", "endSequenceNumber", "approximateArrivalOfFirstRecord",
                                   "approximateArrivalOfLastRecord", "batchSize", "streamArn"])
        #expect(info["shardId"] as? String == "ferry.streams/3")
        #expect(info["batchSize"] as? Int == 2)
        #expect(info["approximateArrivalOfFirstRecord"] as? String == "2023-11-14T22:13:20.000Z")
        #expect(info["streamArn"] as? String == records[0].eventSourceARN)
        #expect((object["kafka"] as? [String: Any])?["firstOffset"] as? Int == 40)
        #expect((object["kafka"] as? [String: Any])?["lastOffset"] as? Int == 41)
        #expect((object["requestContext"] as? [String: Any])?["condition"] as? String == "RetryAttemptsExhausted")
    }

    /// A record too large for Kafka keeps everything but its payload, and says what was left out.
    @Test func aRecordWithoutItsPayload() throws {
        let omitted = OmittedPayload(recordBytes: 1_200_000, recordSHA256: String(repeating: "a", count: 64), reason: "too large")
        let invocation = InvocationRecord(requestId: "r-2", triggerName: "-", condition: "UndecodableEvent", invokeCount: 0,
                                          payload: .raw(String(repeating: "\u{1}", count: 300_000)), error: TriggerTimeout(seconds: 1))
        let small = try json(invocation.omittingPayload(omitted))
        #expect(small["requestPayload"] as? String == "")
        #expect((small["payloadOmitted"] as? [String: Any])?["recordBytes"] as? Int == 1_200_000)
        #expect((small["requestContext"] as? [String: Any])?["condition"] as? String == "UndecodableEvent")

        let message = KafkaMessage(topic: "ferry.streams", partition: 2, offset: 9, key: nil, value: Array(repeating: 1, count: 300_000),
                                   headers: [], timestampMs: 1_700_000_000_000)
        let failure = StreamFailureRecord(trigger: "index", condition: "UndecodableRecord", invokeCount: 0, items: [], messages: [message],
                                          error: StreamDeliveryTests.Planned())
        let stream = try json(failure.omittingPayload(omitted))
        #expect((stream["records"] as? [Any])?.isEmpty == true && stream["undecodable"] == nil)
        #expect((stream["kafka"] as? [String: Any])?["firstOffset"] as? Int == 9, "where the records can be read again")
        #expect((stream["payloadOmitted"] as? [String: Any])?["reason"] as? String == "too large")
        #expect(try JSONEncoder().encode(failure.omittingPayload(omitted)).count < 4096)
    }
}
