import Foundation

/// One object change as a store reported it in its own bucket notification,
/// normalised: Ceph RGW (push endpoints), MinIO (webhook and Kafka targets)
/// and AWS (the S3 event JSON, also inside SNS, SQS and EventBridge
/// envelopes) each shape the same facts a little differently.
public struct StoreNotification: Sendable, Hashable, Codable {
    /// `ceph`, `minio` or `aws`.
    public var store: String
    /// AWS's name, without the `s3:` prefix some stores add: `ObjectCreated:Put`, `ObjectRemoved:Delete`, …
    public var eventName: String
    public var bucket: String
    /// The key as stored (not form-encoded).
    public var key: String
    /// Only for creations (RGW also sends one on removals; AWS does not).
    public var size: Int64?
    /// Without quotes.
    public var eTag: String?
    public var versionId: String?
    public var sequencer: String?
    /// ISO-8601 with milliseconds, UTC.
    public var eventTime: String
    /// The store's identity of this notification (Ceph's `eventId`, or bucket/key/sequencer), for its duplicates.
    public var eventId: String
    /// The object's user metadata when the store sent it (Ceph and MinIO do), names without `x-amz-meta-`.
    public var metadata: [String: String]?
    public var principalId: String
    public var requestId: String
    public var hostId: String
    public var region: String

    public init(store: String, eventName: String, bucket: String, key: String, size: Int64?, eTag: String?, versionId: String?,
                sequencer: String?, eventTime: String, eventId: String, metadata: [String: String]?, principalId: String,
                requestId: String, hostId: String, region: String) {
        self.store = store; self.eventName = eventName; self.bucket = bucket; self.key = key; self.size = size; self.eTag = eTag
        self.versionId = versionId; self.sequencer = sequencer; self.eventTime = eventTime; self.eventId = eventId
        self.metadata = metadata; self.principalId = principalId; self.requestId = requestId; self.hostId = hostId; self.region = region
    }

    public var isRemoval: Bool { eventName.hasPrefix("ObjectRemoved") }

    /// Whether a Ferry worker wrote the object (its transfer-id marker), as far
    /// as the notification itself tells.
    public var carriesFerryMarker: Bool { metadata?[TransferMarker.transferId] != nil }
}

/// Decodes a notification payload into its changes. Test events and SNS
/// subscription messages yield none; anything that is not a notification is
/// `MalformedRequest`, so nothing unknown is stored or published.
public enum StoreNotificationDecoder {
    /// A payload is at most this large: as Ferry's own messages, below Kafka's
    /// default `message.max.bytes`, so whatever decodes can be stored on `<prefix>.ingest`.
    public static let maxBytes = RequestLimits.maxMessageBytes
    /// The longest identifier a change may carry (eTag, version id, sequencer,
    /// event id, principal, request and host ids, region): S3's version ids
    /// are at most 1,024 bytes and the others far shorter.
    public static let maxFieldBytes = 1024

    public static func decode(_ body: [UInt8]) throws(FerryError) -> [StoreNotification] {
        guard body.count <= maxBytes else { throw FerryError(.requestTooLarge, "notification is \(body.count) bytes; the limit is \(maxBytes)") }
        return try decode(try strictObject(body, "notification"), depth: 0)
    }

    /// The JSON object `bytes` holds, held to `StrictJSON` first (a name given
    /// twice would let this reader and another see different events).
    private static func strictObject(_ bytes: [UInt8], _ what: String) throws(FerryError) -> [String: Any] {
        if let problem = StrictJSON.check(bytes) {
            throw FerryError(.malformedRequest, problem.refusing(what))
        }
        guard let object = try? FoundationJSON.object(bytes) as? [String: Any] else {
            throw FerryError(.malformedRequest, "\(what) is not a JSON object")
        }
        return object
    }

    private static func decode(_ object: [String: Any], depth: Int) throws(FerryError) -> [StoreNotification] {
        guard depth < 3 else { throw FerryError(.malformedRequest, "notification envelopes nested too deep") }
        if let records = object["Records"] as? [Any] {
            // An SQS batch (records with a `body`) or S3 records.
            if records.first.flatMap({ ($0 as? [String: Any])?["body"] }) != nil {
                var all: [StoreNotification] = []
                for record in records {
                    guard let message = record as? [String: Any], let body = message["body"] as? String else {
                        throw FerryError(.malformedRequest, "an SQS message body is not a JSON object")
                    }
                    all += try decode(try strictObject(Array(body.utf8), "an SQS message body"), depth: depth + 1)
                }
                return all
            }
            return try records.map { record throws(FerryError) in try s3Record(record) }
        }
        // SNS: the S3 event JSON as a string in `Message`.
        if let type = object["Type"] as? String {
            switch type {
            case "Notification":
                guard let message = object["Message"] as? String else {
                    throw FerryError(.malformedRequest, "SNS notification without an S3 event in Message")
                }
                return try decode(try strictObject(Array(message.utf8), "an SNS Message"), depth: depth + 1)
            case "SubscriptionConfirmation", "UnsubscribeConfirmation":
                return []
            default:
                throw FerryError(.malformedRequest, "unknown SNS message type \(type)")
            }
        }
        // EventBridge.
        if object["source"] as? String == "aws.s3", let detail = object["detail"] as? [String: Any] {
            return [try eventBridge(object, detail: detail)]
        }
        // S3's test event, sent when a notification configuration is saved.
        if (object["Event"] as? String) == "s3:TestEvent" { return [] }
        throw FerryError(.malformedRequest, "not an S3 notification (no Records, SNS or EventBridge envelope)")
    }

    private static func s3Record(_ any: Any) throws(FerryError) -> StoreNotification {
        guard let record = any as? [String: Any], let name = record["eventName"] as? String,
              let s3 = record["s3"] as? [String: Any], let bucket = (s3["bucket"] as? [String: Any])?["name"] as? String,
              let object = s3["object"] as? [String: Any], let rawKey = object["key"] as? String else {
            throw FerryError(.malformedRequest, "an S3 notification record lacks eventName, bucket or key")
        }
        let source = record["eventSource"] as? String ?? "aws:s3"
        let store = source.hasPrefix("ceph") ? "ceph" : source.hasPrefix("minio") ? "minio" : "aws"
        let eventName = name.hasPrefix("s3:") ? String(name.dropFirst(3)) : name
        guard eventName.hasPrefix("ObjectCreated:") || eventName.hasPrefix("ObjectRemoved:") else {
            throw FerryError(.unsupportedOperation, "notification event \(name) is not a creation or removal")
        }
        // Ceph sends keys as stored; AWS and MinIO form-encode them.
        let key = store == "ceph" ? rawKey : FormURLEncoding.decode(rawKey)
        if let problem = ObjectKeyRule.violation(of: key) { throw problem }
        if let problem = RequestLimits.bucketNameProblem(bucket) { throw problem }
        let removal = eventName.hasPrefix("ObjectRemoved")
        let sequencer = try nonEmpty(field(object["sequencer"], "sequencer"))
        let time = normalisedTime(record["eventTime"] as? String)
        var metadata: [String: String]?
        if let entries = object["metadata"] as? [[String: Any]] {  // Ceph: [{"key": "x-amz-meta-…", "val": …}]
            metadata = try userMetadata(entries.compactMap { e in (e["key"] as? String).map { ($0, (e["val"] as? String) ?? "") } })
        } else if let map = object["userMetadata"] as? [String: Any] {  // MinIO: {"X-Amz-Meta-…": …}
            metadata = try userMetadata(map.compactMap { k, v in (v as? String).map { (k, $0) } })
        }
        let responses = record["responseElements"] as? [String: Any]
        return StoreNotification(
            store: store, eventName: eventName, bucket: bucket, key: key,
            size: removal ? nil : try size(object["size"]), eTag: try nonEmpty(field(object["eTag"], "eTag").map(unquoted)),
            versionId: try nonEmpty(field(object["versionId"], "versionId")), sequencer: sequencer, eventTime: time,
            eventId: try nonEmpty(field(record["eventId"], "eventId")) ?? "\(bucket)/\(key)/\(eventName)/\(sequencer ?? time)",
            metadata: metadata,
            principalId: try field((record["userIdentity"] as? [String: Any])?["principalId"], "principalId") ?? "",
            requestId: try field(responses?["x-amz-request-id"], "x-amz-request-id") ?? "",
            hostId: try field(responses?["x-amz-id-2"], "x-amz-id-2") ?? "",
            region: try field(record["awsRegion"], "awsRegion") ?? "")
    }

    private static func eventBridge(_ envelope: [String: Any], detail: [String: Any]) throws(FerryError) -> StoreNotification {
        guard let bucket = (detail["bucket"] as? [String: Any])?["name"] as? String,
              let object = detail["object"] as? [String: Any], let rawKey = object["key"] as? String,
              let type = envelope["detail-type"] as? String else {
            throw FerryError(.malformedRequest, "an EventBridge S3 event lacks its bucket, key or detail-type")
        }
        let reason = detail["reason"] as? String ?? ""
        let eventName: String
        switch (type, reason) {
        case ("Object Created", "CopyObject"): eventName = "ObjectCreated:Copy"
        case ("Object Created", "CompleteMultipartUpload"): eventName = "ObjectCreated:CompleteMultipartUpload"
        case ("Object Created", "PostObject"): eventName = "ObjectCreated:Post"
        case ("Object Created", _): eventName = "ObjectCreated:Put"
        case ("Object Deleted", _):
            eventName = (detail["deletion-type"] as? String) == "Delete Marker Created" ? "ObjectRemoved:DeleteMarkerCreated" : "ObjectRemoved:Delete"
        default: throw FerryError(.unsupportedOperation, "EventBridge event \(type) is not a creation or removal")
        }
        let key = FormURLEncoding.decode(rawKey)
        if let problem = ObjectKeyRule.violation(of: key) { throw problem }
        if let problem = RequestLimits.bucketNameProblem(bucket) { throw problem }
        let sequencer = try nonEmpty(field(object["sequencer"], "sequencer"))
        let time = normalisedTime(envelope["time"] as? String)
        return StoreNotification(
            store: "aws", eventName: eventName, bucket: bucket, key: key,
            size: eventName.hasPrefix("ObjectRemoved") ? nil : try size(object["size"]),
            eTag: try nonEmpty(field(object["etag"], "etag").map(unquoted)),
            versionId: try nonEmpty(field(object["version-id"], "version-id")), sequencer: sequencer, eventTime: time,
            eventId: try nonEmpty(field(envelope["id"], "id")) ?? "\(bucket)/\(key)/\(eventName)/\(sequencer ?? time)",
            metadata: nil, principalId: try field(detail["requester"], "requester") ?? "",
            requestId: try field(detail["request-id"], "request-id") ?? "", hostId: "", region: try field(envelope["region"], "region") ?? "")
    }

    /// `x-amz-meta-` entries, lowercased, without the prefix; at most S3's 2 KiB of them.
    private static func userMetadata(_ pairs: [(String, String)]) throws(FerryError) -> [String: String] {
        var result: [String: String] = [:]
        for (name, value) in pairs where name.lowercased().hasPrefix("x-amz-meta-") {
            result[String(name.lowercased().dropFirst("x-amz-meta-".count))] = value
        }
        let total = result.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        guard total <= MetadataRule.maxBytes else {
            throw FerryError(.malformedRequest, "notification metadata is \(total) bytes; S3 allows \(MetadataRule.maxBytes)")
        }
        return result
    }

    /// A string field (another type reads as absent), at most `maxFieldBytes`:
    /// longer, it is not something a store sends, and could not be published.
    private static func field(_ any: Any?, _ name: String) throws(FerryError) -> String? {
        guard let text = any as? String else { return nil }
        guard text.utf8.count <= maxFieldBytes else {
            throw FerryError(.malformedRequest, "notification field \(name) is \(text.utf8.count) bytes; at most \(maxFieldBytes)")
        }
        return text
    }

    /// An object's size: absent, or a whole number of bytes from 0 up (as a number or its digits).
    private static func size(_ any: Any?) throws(FerryError) -> Int64? {
        guard let any, !(any is NSNull) else { return nil }
        let size: Int64?
        if let n = any as? NSNumber {
            size = Int64(exactly: n.doubleValue)
        } else if let s = any as? String, s.utf8.count <= 19 {
            size = Int64(s)
        } else {
            size = nil
        }
        guard let size, size >= 0 else {
            throw FerryError(.malformedRequest, "notification size \(String(describing: any).prefix(40)) is not a number of bytes")
        }
        return size
    }

    private static func nonEmpty(_ s: String?) -> String? { (s?.isEmpty ?? true) ? nil : s }

    private static func unquoted(_ s: String) -> String {
        s.count >= 2 && s.hasPrefix("\"") && s.hasSuffix("\"") ? String(s.dropFirst().dropLast()) : s
    }

    /// Milliseconds and `Z`, as AWS writes event times (Ceph writes microseconds).
    static func normalisedTime(_ text: String?) -> String {
        guard let text else { return Timestamp.iso8601(Date()) }
        // The form every store writes (`Z`, any fraction): no formatter to make (about 0.1 ms each).
        if let cut = Timestamp.cutToMilliseconds(text) { return cut }
        // Others (an offset for `Z`, a leap second) through Foundation's.
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = fractional.date(from: text) ?? ISO8601DateFormatter().date(from: text) { return Timestamp.iso8601(date) }
        // More than three fraction digits: cut to milliseconds and read again.
        if let dot = text.firstIndex(of: "."), let end = text[dot...].firstIndex(where: { !$0.isNumber && $0 != "." }) {
            let cut = String(text[..<dot]) + String(text[dot..<end].prefix(4)) + String(text[end...])
            if let date = fractional.date(from: cut) { return Timestamp.iso8601(date) }
        }
        return Timestamp.iso8601(Date())
    }
}
