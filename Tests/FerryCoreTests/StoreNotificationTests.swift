import FerryCore
import Foundation
import Testing

/// Each store's notification shape, decoded into the same facts: the raw
/// key, the event name without `s3:`, no size on removals, milliseconds,
/// Ferry's marker when the store sent the metadata. Payloads as the stores
/// send them (Ceph's captured from RGW 16 pushing to a test endpoint).
@Suite struct StoreNotificationTests {
    func decode(_ text: String) throws -> [StoreNotification] { try StoreNotificationDecoder.decode(Array(text.utf8)) }

    static let ceph = #"""
    {"Records":[{"eventVersion":"2.2","eventSource":"ceph:s3","awsRegion":"","eventTime":"2026-11-24T12:34:20.921655Z",
    "eventName":"ObjectCreated:Put","userIdentity":{"principalId":"tester"},"requestParameters":{"sourceIPAddress":""},
    "responseElements":{"x-amz-request-id":"9bb1.4108.758","x-amz-id-2":"100c-default-default"},
    "s3":{"s3SchemaVersion":"1.0","configurationId":"ferry","bucket":{"name":"ingest","ownerIdentity":{"principalId":"tester"},
    "arn":"arn:aws:s3:::ingest","id":"9bb1.4110.1"},"object":{"key":"dir/a b+c.txt","size":5,"eTag":"5d41402abc4b2a76b9719d911017c592",
    "versionId":"","sequencer":"4C84056BAC290937","metadata":[{"key":"x-amz-meta-ferry-transfer-id","val":"t1"}],"tags":[]}},
    "eventId":"1795523660.923347.5d41402abc4b2a76b9719d911017c592","opaqueData":""}]}
    """#

    @Test func cephSendsRawKeysMicrosecondsAndMetadata() throws {
        let change = try #require(try decode(Self.ceph).first)
        #expect(change.store == "ceph" && change.eventName == "ObjectCreated:Put")
        #expect(change.bucket == "ingest" && change.key == "dir/a b+c.txt", "raw, not form-decoded (the + stays)")
        #expect(change.size == 5 && change.eTag == "5d41402abc4b2a76b9719d911017c592" && change.versionId == nil)
        #expect(change.eventTime == "2026-11-24T12:34:20.921Z")
        #expect(change.carriesFerryMarker && change.eventId == "1795523660.923347.5d41402abc4b2a76b9719d911017c592")
        // A removal: Ceph sends a size, AWS's shape has none.
        let removal = Self.ceph.replacingOccurrences(of: "ObjectCreated:Put", with: "ObjectRemoved:Delete")
        let removed = try #require(try decode(removal).first)
        #expect(removed.isRemoval && removed.size == nil)
    }

    @Test func minioFormEncodesKeysAndPrefixesEventNames() throws {
        let minio = #"""
        {"EventName":"s3:ObjectCreated:Put","Key":"images/my photo.jpg","Records":[{"eventVersion":"2.0","eventSource":"minio:s3",
        "awsRegion":"","eventTime":"2019-05-02T11:05:07.549Z","eventName":"s3:ObjectCreated:Put","userIdentity":{"principalId":"minio"},
        "requestParameters":{"accessKey":"minio","region":"","sourceIPAddress":"127.0.0.1"},
        "responseElements":{"x-amz-request-id":"159AD8E6F6805783","x-minio-origin-endpoint":"http://127.0.0.1:9000"},
        "s3":{"s3SchemaVersion":"1.0","configurationId":"Config","bucket":{"name":"images","ownerIdentity":{"principalId":"minio"},
        "arn":"arn:aws:s3:::images"},"object":{"key":"my+photo%3F.jpg","size":4,"eTag":"\"abc\"","contentType":"image/jpeg",
        "userMetadata":{"content-type":"image/jpeg"},"versionId":"1","sequencer":"159AD8E6F76DD9C4"}}}]}
        """#
        let change = try #require(try decode(minio).first)
        #expect(change.store == "minio" && change.eventName == "ObjectCreated:Put" && change.key == "my photo?.jpg")
        #expect(change.eTag == "abc" && change.metadata == [:] && !change.carriesFerryMarker)
        #expect(change.eventId == "images/my photo?.jpg/ObjectCreated:Put/159AD8E6F76DD9C4")
    }

    static let aws = #"""
    {"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"eu-west-1","eventTime":"2026-01-02T03:04:05.678Z",
    "eventName":"ObjectCreated:CompleteMultipartUpload","userIdentity":{"principalId":"AWS:AIDAEXAMPLE"},
    "requestParameters":{"sourceIPAddress":"203.0.113.7"},"responseElements":{"x-amz-request-id":"C3D13FE58DE4C810","x-amz-id-2":"FMyU"},
    "s3":{"s3SchemaVersion":"1.0","configurationId":"c","bucket":{"name":"photos","ownerIdentity":{"principalId":"A3NL"},
    "arn":"arn:aws:s3:::photos"},"object":{"key":"cats/tom+%26+jerry.jpg","size":1024,"eTag":"d41d8cd98f00b204e9800998ecf8427e-2",
    "sequencer":"0055AED6DCD90281E5"}}}]}
    """#

    @Test func awsDirectSNSAndSQSAreTheSameFacts() throws {
        let direct = try decode(Self.aws)
        #expect(direct.count == 1 && direct[0].key == "cats/tom & jerry.jpg" && direct[0].metadata == nil && direct[0].region == "eu-west-1")
        let message = String(decoding: try JSONEncoder().encode(Self.aws), as: UTF8.self)
        let sns = #"{"Type":"Notification","MessageId":"m1","TopicArn":"arn:aws:sns:eu-west-1:1:t","Message":\#(message)}"#
        #expect(try decode(sns) == direct)
        let sqs = #"{"Records":[{"messageId":"1","body":\#(String(decoding: try JSONEncoder().encode(sns), as: UTF8.self))},{"messageId":"2","body":\#(message)}]}"#
        #expect(try decode(sqs) == direct + direct)
        #expect(try decode(#"{"Type":"SubscriptionConfirmation","SubscribeURL":"https://sns.example/confirm"}"#).isEmpty)
        #expect(try decode(#"{"Service":"Amazon S3","Event":"s3:TestEvent","Bucket":"photos"}"#).isEmpty)
    }

    @Test func eventBridgeMapsReasonsToEventNames() throws {
        func bridge(_ type: String, _ reason: String) -> String {
            #"{"version":"0","id":"e-1","detail-type":"\#(type)","source":"aws.s3","time":"2026-01-02T03:04:05Z","region":"us-east-1","detail":{"bucket":{"name":"photos"},"object":{"key":"a%20b.txt","size":7,"etag":"e1","sequencer":"00AB"},"request-id":"r1","requester":"123","reason":"\#(reason)"}}"#
        }
        #expect(try decode(bridge("Object Created", "PutObject")).first?.eventName == "ObjectCreated:Put")
        #expect(try decode(bridge("Object Created", "CopyObject")).first?.eventName == "ObjectCreated:Copy")
        #expect(try decode(bridge("Object Created", "CompleteMultipartUpload")).first?.eventName == "ObjectCreated:CompleteMultipartUpload")
        let removed = try #require(try decode(bridge("Object Deleted", "DeleteObject")).first)
        #expect(removed.eventName == "ObjectRemoved:Delete" && removed.size == nil && removed.key == "a b.txt" && removed.eventId == "e-1")
        #expect(removed.eventTime == "2026-01-02T03:04:05.000Z")
    }

    @Test(arguments: [
        "not json", "[]", #"{"Records":[{"eventName":"ObjectCreated:Put"}]}"#, #"{"Type":"Notification","Message":"nope"}"#,
        #"{"Records":[{"eventName":"ObjectRestore:Post","s3":{"bucket":{"name":"abc"},"object":{"key":"k"}}}]}"#,
        #"{"Records":[{"eventName":"ObjectCreated:Put","eventSource":"ceph:s3","s3":{"bucket":{"name":"abc"},"object":{"key":"../private/alice/x"}}}]}"#,
        #"{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"../etc"},"object":{"key":"k"}}}]}"#,
        #"{"anything":"else"}"#,
    ])
    func whatIsNotANotificationIsRefused(payload: String) {
        #expect(throws: FerryError.self) { try decode(payload) }
    }
}
