import FerryCore
import Foundation
import Testing

/// DynamoDB stream events, AttributeValue and the batch response, against the
/// shapes AWS documents; S3 event variants of MinIO and Ceph.
@Suite struct StreamEventShapeTests {
    /// AWS Lambda Developer Guide, "Using AWS Lambda with Amazon DynamoDB",
    /// example DynamoDB stream event (INSERT, MODIFY, REMOVE), typed in from the documentation.
    static let awsSample = """
        {"Records":[
        {"eventID":"c4ca4238a0b923820dcc509a6f75849b","eventName":"INSERT","eventVersion":"1.1","eventSource":"aws:dynamodb",
         "awsRegion":"us-east-1","dynamodb":{"Keys":{"Id":{"N":"101"}},"NewImage":{"Message":{"S":"New item!"},"Id":{"N":"101"}},
         "ApproximateCreationDateTime":1428537600,"SequenceNumber":"4421584500000000017450439091","SizeBytes":26,
         "StreamViewType":"NEW_AND_OLD_IMAGES"},
         "eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/ExampleTableWithStream/stream/2015-06-27T00:48:05.899"},
        {"eventID":"c81e728d9d4c2f636f067f89cc14862c","eventName":"MODIFY","eventVersion":"1.1","eventSource":"aws:dynamodb",
         "awsRegion":"us-east-1","dynamodb":{"Keys":{"Id":{"N":"101"}},"NewImage":{"Message":{"S":"This item has changed"},"Id":{"N":"101"}},
         "OldImage":{"Message":{"S":"New item!"},"Id":{"N":"101"}},"ApproximateCreationDateTime":1428537600,
         "SequenceNumber":"4421584500000000017450439092","SizeBytes":59,"StreamViewType":"NEW_AND_OLD_IMAGES"},
         "eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/ExampleTableWithStream/stream/2015-06-27T00:48:05.899"},
        {"eventID":"eccbc87e4b5ce2fe28308fd9f2a7baf3","eventName":"REMOVE","eventVersion":"1.1","eventSource":"aws:dynamodb",
         "awsRegion":"us-east-1","dynamodb":{"Keys":{"Id":{"N":"101"}},"OldImage":{"Message":{"S":"This item has changed"},"Id":{"N":"101"}},
         "ApproximateCreationDateTime":1428537600,"SequenceNumber":"4421584500000000017450439093","SizeBytes":38,
         "StreamViewType":"NEW_AND_OLD_IMAGES"},
         "eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/ExampleTableWithStream/stream/2015-06-27T00:48:05.899"}]}
        """

    /// DynamoDB Developer Guide, time to live: a deletion by TTL carries the service identity.
    static let ttlRemoval = """
        {"eventID":"a9fb4a1a8a0b0a6d4c1e1f6b1b0b7a91","eventName":"REMOVE","eventVersion":"1.1","eventSource":"aws:dynamodb",
         "awsRegion":"us-east-1","userIdentity":{"type":"Service","principalId":"dynamodb.amazonaws.com"},
         "dynamodb":{"Keys":{"Id":{"S":"a"}},"SequenceNumber":"100000000000000000001","SizeBytes":4,"StreamViewType":"KEYS_ONLY"},
         "eventSourceARN":"arn:aws:dynamodb:us-east-1:123456789012:table/T/stream/2020-01-01T00:00:00.000"}
        """

    func object(_ text: String) throws -> NSDictionary {
        try JSONSerialization.jsonObject(with: Data(text.utf8)) as! NSDictionary
    }

    @Test func decodesAndReencodesAWSsSampleStreamEvent() throws {
        let event = try JSONDecoder().decode(DynamoDBEvent.self, from: Data(Self.awsSample.utf8))
        #expect(event.records.map(\.eventName) == [.insert, .modify, .remove])
        #expect(event.records[0].dynamodb.keys["Id"] == .number("101"))
        #expect(event.records[1].dynamodb.oldImage?["Message"] == .string("New item!"))
        #expect(event.records[2].dynamodb.newImage == nil)
        #expect(event.records[0].tableName == "ExampleTableWithStream")
        let reencoded = try JSONSerialization.jsonObject(with: JSONEncoder().encode(event)) as! NSDictionary
        #expect(reencoded == (try object(Self.awsSample)))
    }

    @Test func ttlRemovalKeepsTheServiceIdentity() throws {
        let record = try JSONDecoder().decode(DynamoDBEvent.Record.self, from: Data(Self.ttlRemoval.utf8))
        #expect(record.userIdentity == .service)
        #expect(record.dynamodb.streamViewType == .keysOnly)
        let reencoded = try JSONSerialization.jsonObject(with: JSONEncoder().encode(record)) as! NSDictionary
        #expect(reencoded == (try object(Self.ttlRemoval)))
    }

    /// Every one of DynamoDB's ten type tags, in its documented JSON form.
    @Test func attributeValuesOfAllTenTagsRoundTrip() throws {
        let text = """
            {"s":{"S":"Hello"},"n":{"N":"123.45"},"b":{"B":"dGhpcyB0ZXh0IGlzIGJhc2U2NC1lbmNvZGVk"},
             "ss":{"SS":["Giraffe","Hippo","Zebra"]},"ns":{"NS":["42.2","-19","7.5","3.14"]},
             "bs":{"BS":["U3Vubnk=","UmFpbnk=","U25vd3k="]},
             "m":{"M":{"Name":{"S":"Joe"},"Age":{"N":"35"}}},
             "l":{"L":[{"S":"Cookies"},{"S":"Coffee"},{"N":"3.14159"}]},
             "null":{"NULL":true},"bool":{"BOOL":true}}
            """
        let map = try JSONDecoder().decode(AttributeMap.self, from: Data(text.utf8))
        #expect(map["n"] == .number("123.45"))  // kept as the string DynamoDB sent: no precision lost
        #expect(map["b"] == .binary(Array("this text is base64-encoded".utf8)))
        #expect(map["bs"] == .binarySet([Array("Sunny".utf8), Array("Rainy".utf8), Array("Snowy".utf8)]))
        #expect(map["m"] == .map(["Name": .string("Joe"), "Age": .number("35")]))
        #expect(map["null"] == .null)
        #expect(map["bool"] == .bool(true))
        let reencoded = try JSONSerialization.jsonObject(with: JSONEncoder().encode(map)) as! NSDictionary
        #expect(reencoded == (try object(text)))
        // A value must carry exactly one tag.
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(AttributeValue.self, from: Data(#"{"S":"a","N":"1"}"#.utf8)) }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(AttributeValue.self, from: Data(#"{"B":"not base64!"}"#.utf8)) }
    }

    /// Ferry's own record, field by field against the documented names.
    @Test func goldenStreamRecord() throws {
        let record = DynamoDBEvent.Record(
            eventID: "0123456789abcdef0123456789abcdef", eventName: .modify, awsRegion: "us-east-1",
            eventSourceARN: "arn:aws:dynamodb:us-east-1:000000000000:table/objects/stream/ferry",
            dynamodb: StreamRecord(approximateCreationDateTime: 1_700_000_000.5,
                                   keys: ["bucket": .string("b"), "key": .string("public/a.txt")],
                                   newImage: ["bucket": .string("b"), "key": .string("public/a.txt"), "size": .number(7)],
                                   oldImage: ["bucket": .string("b"), "key": .string("public/a.txt"), "size": .number(5)],
                                   sequenceNumber: "1000000000000000000420000", streamViewType: .newAndOldImages))
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(record)) as! [String: Any]
        #expect(Set(json.keys) == ["eventID", "eventName", "eventVersion", "eventSource", "awsRegion", "eventSourceARN", "dynamodb"])
        #expect(json["eventName"] as? String == "MODIFY")
        #expect(json["eventSource"] as? String == "aws:dynamodb")
        #expect(json["eventVersion"] as? String == "1.1")
        let dynamodb = json["dynamodb"] as! [String: Any]
        #expect(Set(dynamodb.keys) == ["ApproximateCreationDateTime", "Keys", "NewImage", "OldImage", "SequenceNumber", "SizeBytes", "StreamViewType"])
        #expect((dynamodb["NewImage"] as? [String: Any])?["size"] as? [String: String] == ["N": "7"])
        #expect((21...40).contains((dynamodb["SequenceNumber"] as! String).count))
        #expect(dynamodb["StreamViewType"] as? String == "NEW_AND_OLD_IMAGES")
        // Projection to the view types a handler may register.
        let keysOnly = record.dynamodb.projected(to: .keysOnly)
        #expect(keysOnly.newImage == nil && keysOnly.oldImage == nil && keysOnly.streamViewType == .keysOnly)
        #expect(record.dynamodb.projected(to: .newImage).oldImage == nil)
        #expect(record.dynamodb.projected(to: .oldImage).newImage == nil)
        #expect(keysOnly.sizeBytes < record.dynamodb.sizeBytes)
    }

    /// Lambda's documented partial batch response.
    @Test func batchResponseShape() throws {
        let response = StreamBatchResponse(failedEventIDs: ["c81e728d9d4c2f636f067f89cc14862c"])
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        #expect(String(decoding: try encoder.encode(response), as: UTF8.self)
                == #"{"batchItemFailures":[{"itemIdentifier":"c81e728d9d4c2f636f067f89cc14862c"}]}"#)
        #expect(try JSONDecoder().decode(StreamBatchResponse.self, from: Data(#"{"batchItemFailures":[]}"#.utf8)) == .success)
    }

    /// MinIO's notification (from its documentation): `s3:` event names, `minio:s3`, extra fields.
    @Test func decodesMinIOsVariant() throws {
        let text = """
            {"EventName":"s3:ObjectCreated:Put","Key":"images/my photo.jpg","Records":[{"eventVersion":"2.0","eventSource":"minio:s3",
            "awsRegion":"","eventTime":"2019-09-10T17:41:54Z","eventName":"s3:ObjectCreated:Put","userIdentity":{"principalId":"minio"},
            "requestParameters":{"accessKey":"minio","region":"","sourceIPAddress":"127.0.0.1"},
            "responseElements":{"content-length":"0","x-amz-request-id":"15C3249451E12784","x-minio-deployment-id":"751a8ba6",
            "x-minio-origin-endpoint":"http://192.168.86.110:9000"},
            "s3":{"s3SchemaVersion":"1.0","configurationId":"Config","bucket":{"name":"images","ownerIdentity":{"principalId":"minio"},
            "arn":"arn:aws:s3:::images"},"object":{"key":"my+photo.jpg","size":200436,"eTag":"6b8ed8a8a6d9b5e9f3b6b6f4b1b2c3d4",
            "contentType":"image/jpeg","userMetadata":{"content-type":"image/jpeg"},"sequencer":"15C32494528B2AB7"}},
            "source":{"host":"127.0.0.1","port":"","userAgent":"MinIO (linux; amd64) minio-go/v6.0.32"}}]}
            """
        let event = try JSONDecoder().decode(S3Event.self, from: Data(text.utf8))
        let record = try #require(event.records.first)
        #expect(record.eventSource == "minio:s3")
        #expect(record.eventType == "ObjectCreated:Put")
        #expect(record.responseElements.requestId == "15C3249451E12784")
        #expect(record.responseElements.id2 == "")
        #expect(record.s3.object.decodedKey == "my photo.jpg")
    }

    /// Ceph RGW's notification (from its documentation): `ceph:s3`, size as a string, raw keys.
    @Test func decodesCephsVariant() throws {
        let text = """
            {"Records":[{"eventVersion":"2.1","eventSource":"ceph:s3","awsRegion":"us-east-1","eventTime":"2019-11-22T13:47:35.124724Z",
            "eventName":"ObjectCreated:Put","userIdentity":{"principalId":"tester"},"requestParameters":{"sourceIPAddress":""},
            "responseElements":{"x-amz-request-id":"503a4c37-85eb-47cd-8681-2817e80b4281.5330.903595","x-amz-id-2":"14d2-zone1-zonegroup1"},
            "s3":{"s3SchemaVersion":"1.0","configurationId":"mynotif1","bucket":{"name":"mybucket1","ownerIdentity":{"principalId":"tester"},
            "arn":"arn:aws:s3:us-east-1::mybucket1","id":"503a4c37-85eb-47cd-8681-2817e80b4281.5332.38"},
            "object":{"key":"my image 100%.jpg","size":"1024","eTag":"37b51d194a7513e45b56f6524f2d51f2","versionId":"",
            "sequencer":"F7E6D75DC742D108","metadata":[],"tags":[]}},"eventId":"","opaqueData":"me@example.com"}]}
            """
        let record = try #require(try JSONDecoder().decode(S3Event.self, from: Data(text.utf8)).records.first)
        #expect(record.eventSource == "ceph:s3")
        #expect(record.s3.object.size == 1024)
        #expect(record.s3.object.decodedKey == "my image 100%.jpg")  // raw key: not form-decoded
        #expect(record.s3.bucket.arn == "arn:aws:s3:us-east-1::mybucket1")
    }

    /// S3 sends this once when a notification configuration is saved (S3 User Guide).
    @Test func recognisesTheTestEvent() throws {
        let text = #"{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2014-10-13T15:57:02.089Z","Bucket":"bucketname","RequestId":"5582815E1AEA5ADF","HostId":"8cLeGAmw098X5cv4Zkwcmo8vvZa3eH3eKxsPzbB9wrR+YstdA6Knx4Ip8EXAMPLE"}"#
        let test = try #require(S3TestEvent.detect(Array(text.utf8)))
        #expect(test.bucket == "bucketname")
        #expect(S3TestEvent.detect(Array(EventShapeTests.awsSample.utf8)) == nil)
    }
}
