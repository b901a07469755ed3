import Foundation

/// An S3 event notification, in exactly the JSON shape AWS delivers to Lambda,
/// so a handler written for Lambda reads it unchanged.
public struct S3Event: Sendable, Codable, Hashable {
    public var records: [Record]

    public init(records: [Record]) { self.records = records }

    enum CodingKeys: String, CodingKey { case records = "Records" }

    public struct Record: Sendable, Codable, Hashable {
        public var eventVersion: String
        public var eventSource: String
        public var awsRegion: String
        /// ISO-8601 with milliseconds, UTC.
        public var eventTime: String
        /// e.g. `ObjectCreated:Put`, `ObjectRemoved:Delete` (no `s3:` prefix).
        public var eventName: String
        public var userIdentity: UserIdentity
        public var requestParameters: RequestParameters
        public var responseElements: ResponseElements
        public var s3: Entity

        public init(eventVersion: String = "2.1", eventSource: String = "aws:s3", awsRegion: String,
                    eventTime: String, eventName: String, userIdentity: UserIdentity,
                    requestParameters: RequestParameters, responseElements: ResponseElements, s3: Entity) {
            self.eventVersion = eventVersion; self.eventSource = eventSource; self.awsRegion = awsRegion
            self.eventTime = eventTime; self.eventName = eventName; self.userIdentity = userIdentity
            self.requestParameters = requestParameters; self.responseElements = responseElements; self.s3 = s3
        }
    }

    public struct UserIdentity: Sendable, Codable, Hashable {
        public var principalId: String
        public init(principalId: String) { self.principalId = principalId }
    }

    public struct RequestParameters: Sendable, Codable, Hashable {
        public var sourceIPAddress: String
        public init(sourceIPAddress: String) { self.sourceIPAddress = sourceIPAddress }
    }

    public struct ResponseElements: Sendable, Codable, Hashable {
        public var requestId: String
        public var id2: String
        public init(requestId: String, id2: String) { self.requestId = requestId; self.id2 = id2 }
        enum CodingKeys: String, CodingKey {
            case requestId = "x-amz-request-id"
            case id2 = "x-amz-id-2"
        }
    }

    public struct Entity: Sendable, Codable, Hashable {
        public var s3SchemaVersion: String
        public var configurationId: String
        public var bucket: Bucket
        public var object: Object
        public init(s3SchemaVersion: String = "1.0", configurationId: String, bucket: Bucket, object: Object) {
            self.s3SchemaVersion = s3SchemaVersion; self.configurationId = configurationId
            self.bucket = bucket; self.object = object
        }
    }

    public struct Bucket: Sendable, Codable, Hashable {
        public var name: String
        public var ownerIdentity: UserIdentity
        public var arn: String
        public init(name: String, ownerIdentity: UserIdentity, arn: String? = nil) {
            self.name = name; self.ownerIdentity = ownerIdentity; self.arn = arn ?? "arn:aws:s3:::\(name)"
        }
    }

    public struct Object: Sendable, Codable, Hashable {
        /// The key as AWS sends it: form-URL-encoded (space is `+`). See `decodedKey`.
        public var key: String
        public var size: Int64?
        public var eTag: String?
        public var versionId: String?
        /// Hex; grows per key, so handlers can order events of one key.
        public var sequencer: String?

        public init(key: String, size: Int64? = nil, eTag: String? = nil, versionId: String? = nil, sequencer: String? = nil) {
            self.key = key; self.size = size; self.eTag = eTag; self.versionId = versionId; self.sequencer = sequencer
        }

        /// Builds the object part from a raw (unencoded) S3 key.
        public init(rawKey: String, size: Int64? = nil, eTag: String? = nil, versionId: String? = nil, sequencer: String? = nil) {
            self.init(key: FormURLEncoding.encode(rawKey), size: size, eTag: eTag, versionId: versionId, sequencer: sequencer)
        }

        /// The key as stored in S3.
        public var decodedKey: String { FormURLEncoding.decode(key) }
    }
}

/// `application/x-www-form-urlencoded` as S3 applies it to keys in events.
public enum FormURLEncoding {
    public static func encode(_ s: String) -> String {
        var out = ""
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"),
                 UInt8(ascii: "."), UInt8(ascii: "*"), UInt8(ascii: "/"):
                out.unicodeScalars.append(UnicodeScalar(byte))
            case UInt8(ascii: " "):
                out.append("+")
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    public static func decode(_ s: String) -> String {
        let plusDecoded = s.replacingOccurrences(of: "+", with: " ")
        return plusDecoded.removingPercentEncoding ?? plusDecoded
    }
}
