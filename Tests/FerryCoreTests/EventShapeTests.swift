import FerryCore
import Foundation
import Testing

@Suite struct EventShapeTests {
    /// AWS's documented example of an S3 event as Lambda receives it (Amazon S3
    /// User Guide, "Event message structure"), typed in from the documentation.
    static let awsSample = """
        {"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"us-west-2",
        "eventTime":"1970-01-01T00:00:00.000Z","eventName":"ObjectCreated:Put",
        "userIdentity":{"principalId":"AIDAJDPLRKLG7UEXAMPLE"},
        "requestParameters":{"sourceIPAddress":"127.0.0.1"},
        "responseElements":{"x-amz-request-id":"C3D13FE58DE4C810","x-amz-id-2":"FMyUVURIY8/IgAtTv8xRjskZQpcIZ9KG4V5Wp6S7S/JRWeUWerMUE5JgHvANOjpD"},
        "s3":{"s3SchemaVersion":"1.0","configurationId":"testConfigRule",
        "bucket":{"name":"mybucket","ownerIdentity":{"principalId":"A3NL1KOZZKExample"},"arn":"arn:aws:s3:::mybucket"},
        "object":{"key":"HappyFace.jpg","size":1024,"eTag":"d41d8cd98f00b204e9800998ecf8427e",
        "versionId":"096fKKXTRTtl3on89fVO.nfljtsv6qko","sequencer":"0055AED6DCD90281E5"}}}]}
        """

    @Test func decodesAndReencodesAWSsSample() throws {
        let event = try JSONDecoder().decode(S3Event.self, from: Data(Self.awsSample.utf8))
        let record = try #require(event.records.first)
        #expect(record.eventName == "ObjectCreated:Put")
        #expect(record.responseElements.requestId == "C3D13FE58DE4C810")
        #expect(record.s3.object.size == 1024)
        #expect(record.s3.bucket.arn == "arn:aws:s3:::mybucket")
        let reencoded = try JSONSerialization.jsonObject(with: JSONEncoder().encode(event)) as! NSDictionary
        let original = try JSONSerialization.jsonObject(with: Data(Self.awsSample.utf8)) as! NSDictionary
        #expect(reencoded == original)
    }

    @Test func removalOmitsSizeAndETag() throws {
        let object = S3Event.Object(rawKey: "a b/ü+&.txt", sequencer: "0A")
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(object)) as! [String: Any]
        #expect(json["size"] == nil)
        #expect(json["eTag"] == nil)
        #expect(json["key"] as? String == "a+b/%C3%BC%2B%26.txt")
        #expect(object.decodedKey == "a b/ü+&.txt")
    }

    @Test func statusShape() throws {
        let status = TransferStatus(id: "t1", op: "upload", state: .completed, bytesTransferred: 5, totalBytes: 5,
                                    attempt: 1, worker: "w1", time: Date(timeIntervalSince1970: 1_700_000_000.5),
                                    object: .init(bucket: "b", key: "public/k", size: 5, eTag: "\"e\""))
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(status)) as! [String: Any]
        #expect(json["state"] as? String == "completed")
        #expect(json["time"] as? String == "2023-11-14T22:13:20.500Z")
        #expect((json["object"] as? [String: Any])?["key"] as? String == "public/k")
        #expect(TransferStatus.State.allCases.filter(\.isTerminal) == [.completed, .failed, .cancelled, .rejected])
    }
}
