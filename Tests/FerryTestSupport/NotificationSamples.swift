/// Bucket notifications as each store sends them (Ceph's captured from RGW 16
/// pushing to a test endpoint; the others from the stores' documentation),
/// for the decoder's tests and as the seeds its hostile variants grow from.
public enum NotificationSamples {
    public static let ceph = #"""
    {"Records":[{"eventVersion":"2.2","eventSource":"ceph:s3","awsRegion":"","eventTime":"2026-11-24T12:34:20.921655Z",
    "eventName":"ObjectCreated:Put","userIdentity":{"principalId":"tester"},"requestParameters":{"sourceIPAddress":""},
    "responseElements":{"x-amz-request-id":"9bb1.4108.758","x-amz-id-2":"100c-default-default"},
    "s3":{"s3SchemaVersion":"1.0","configurationId":"ferry","bucket":{"name":"ingest","ownerIdentity":{"principalId":"tester"},
    "arn":"arn:aws:s3:::ingest","id":"9bb1.4110.1"},"object":{"key":"dir/a b+c.txt","size":5,"eTag":"5d41402abc4b2a76b9719d911017c592",
    "versionId":"","sequencer":"4C84056BAC290937","metadata":[{"key":"x-amz-meta-ferry-transfer-id","val":"t1"}],"tags":[]}},
    "eventId":"1795523660.923347.5d41402abc4b2a76b9719d911017c592","opaqueData":""}]}
    """#

    public static let minio = #"""
    {"EventName":"s3:ObjectCreated:Put","Key":"images/my photo.jpg","Records":[{"eventVersion":"2.0","eventSource":"minio:s3",
    "awsRegion":"","eventTime":"2019-05-02T11:05:07.549Z","eventName":"s3:ObjectCreated:Put","userIdentity":{"principalId":"minio"},
    "requestParameters":{"accessKey":"minio","region":"","sourceIPAddress":"127.0.0.1"},
    "responseElements":{"x-amz-request-id":"159AD8E6F6805783","x-minio-origin-endpoint":"http://127.0.0.1:9000"},
    "s3":{"s3SchemaVersion":"1.0","configurationId":"Config","bucket":{"name":"images","ownerIdentity":{"principalId":"minio"},
    "arn":"arn:aws:s3:::images"},"object":{"key":"my+photo%3F.jpg","size":4,"eTag":"\"abc\"","contentType":"image/jpeg",
    "userMetadata":{"content-type":"image/jpeg"},"versionId":"1","sequencer":"159AD8E6F76DD9C4"}}}]}
    """#

    public static let aws = #"""
    {"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"eu-west-1","eventTime":"2026-01-02T03:04:05.678Z",
    "eventName":"ObjectCreated:CompleteMultipartUpload","userIdentity":{"principalId":"AWS:AIDAEXAMPLE"},
    "requestParameters":{"sourceIPAddress":"203.0.113.7"},"responseElements":{"x-amz-request-id":"C3D13FE58DE4C810","x-amz-id-2":"FMyU"},
    "s3":{"s3SchemaVersion":"1.0","configurationId":"c","bucket":{"name":"photos","ownerIdentity":{"principalId":"A3NL"},
    "arn":"arn:aws:s3:::photos"},"object":{"key":"cats/tom+%26+jerry.jpg","size":1024,"eTag":"d41d8cd98f00b204e9800998ecf8427e-2",
    "sequencer":"0055AED6DCD90281E5"}}}]}
    """#

    /// EventBridge's shape, for a detail type and reason.
    public static func eventBridge(_ type: String = "Object Created", _ reason: String = "PutObject") -> String {
        #"{"version":"0","id":"e-1","detail-type":"\#(type)","source":"aws.s3","time":"2026-01-02T03:04:05Z","region":"us-east-1","detail":{"bucket":{"name":"photos"},"object":{"key":"a%20b.txt","size":7,"etag":"e1","sequencer":"00AB"},"request-id":"r1","requester":"123","reason":"\#(reason)"}}"#
    }

    /// The S3 event delivered through SNS (`Message` holds it as a string).
    public static var awsThroughSNS: String {
        #"{"Type":"Notification","MessageId":"m1","TopicArn":"arn:aws:sns:eu-west-1:1:t","Message":\#(HostileInput.jsonString(aws))}"#
    }

    /// An SQS batch: one message from SNS, one with the event itself.
    public static var sqsBatch: String {
        #"{"Records":[{"messageId":"1","body":\#(HostileInput.jsonString(awsThroughSNS))},{"messageId":"2","body":\#(HostileInput.jsonString(aws))}]}"#
    }

    public static var all: [String] {
        [ceph, ceph.replacingOccurrences(of: "ObjectCreated:Put", with: "ObjectRemoved:Delete"), minio, aws, awsThroughSNS, sqsBatch,
         eventBridge(), eventBridge("Object Deleted", "DeleteObject")]
    }
}
