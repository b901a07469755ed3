import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// Each store's notification shape, decoded into the same facts: the raw
/// key, the event name without `s3:`, no size on removals, milliseconds,
/// Ferry's marker when the store sent the metadata. Payloads as the stores
/// send them (Ceph's captured from RGW 16 pushing to a test endpoint).
@Suite struct StoreNotificationTests {
    func decode(_ text: String) throws -> [StoreNotification] { try StoreNotificationDecoder.decode(Array(text.utf8)) }

    static let ceph = NotificationSamples.ceph

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
        let minio = NotificationSamples.minio
        let change = try #require(try decode(minio).first)
        #expect(change.store == "minio" && change.eventName == "ObjectCreated:Put" && change.key == "my photo?.jpg")
        #expect(change.eTag == "abc" && change.metadata == [:] && !change.carriesFerryMarker)
        #expect(change.eventId == "images/my photo?.jpg/ObjectCreated:Put/159AD8E6F76DD9C4")
    }

    static let aws = NotificationSamples.aws

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

    /// A store's event time keeps its milliseconds (Ceph's microseconds are
    /// cut to them): before `Timestamp.iso8601` had its grace, about half of
    /// generated times came out a millisecond early.
    @Test func eventTimesKeepTheirMilliseconds() throws {
        var rng = SeededGenerator(seed: FuzzReplay.seed)
        for _ in 0..<1_000 {
            let whole = String(Timestamp.iso8601(Date(timeIntervalSince1970: Double(Int.random(in: 0...4_102_444_800, using: &rng)))).dropLast(5))
            let ms = String(1000 + Int.random(in: 0...999, using: &rng)).dropFirst()
            let micro = String(1000 + Int.random(in: 0...999, using: &rng)).dropFirst()
            let aws = Self.aws.replacingOccurrences(of: "2026-01-02T03:04:05.678Z", with: "\(whole).\(ms)Z")
            #expect(try decode(aws).first?.eventTime == "\(whole).\(ms)Z")
            let ceph = Self.ceph.replacingOccurrences(of: "2026-11-24T12:34:20.921655Z", with: "\(whole).\(ms)\(micro)Z")
            #expect(try decode(ceph).first?.eventTime == "\(whole).\(ms)Z")
        }
        // An offset instead of Z, and no fraction: Foundation's formatter reads them.
        let offset = Self.aws.replacingOccurrences(of: "2026-01-02T03:04:05.678Z", with: "2026-01-02T04:04:05.678+01:00")
        #expect(try decode(offset).first?.eventTime == "2026-01-02T03:04:05.678Z")
        let whole = Self.aws.replacingOccurrences(of: "2026-01-02T03:04:05.678Z", with: "2026-01-02T03:04:05Z")
        #expect(try decode(whole).first?.eventTime == "2026-01-02T03:04:05.000Z")
    }

    @Test func eventBridgeMapsReasonsToEventNames() throws {
        let bridge = NotificationSamples.eventBridge
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

    /// A notification that names a member twice, at any level or inside an
    /// SNS `Message` or SQS `body`, is refused with where: which key or
    /// bucket it announces depends on the reader.
    @Test func aNotificationThatNamesAMemberTwiceIsRefused() throws {
        let good = Self.aws
        #expect(throws: Never.self) { try decode(good) }
        let twice = good.replacingOccurrences(of: #""key":"#, with: #""key":"private/alice/x","key":"#)
        #expect(twice != good)
        #expect(throws: FerryError.self) { try decode(twice) }
        do { _ = try decode(twice) } catch {
            #expect((error as? FerryError)?.message.contains("member 'Records[0].s3.object.key' appears more than once") == true, "\(error)")
        }
        let sns = String(decoding: try JSONSerialization.data(withJSONObject: ["Type": "Notification", "Message": twice]), as: UTF8.self)
        do { _ = try decode(sns); Issue.record("an SNS Message with a repeat was taken") } catch {
            #expect((error as? FerryError)?.message.hasPrefix("an SNS Message: member 'Records[0].s3.object.key'") == true, "\(error)")
        }
        let sqs = String(decoding: try JSONSerialization.data(withJSONObject: ["Records": [["body": twice]]]), as: UTF8.self)
        #expect(throws: FerryError.self) { try decode(sqs) }
    }
}
