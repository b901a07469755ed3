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

        /// The event type without the `s3:` prefix MinIO and older Ceph write.
        public var eventType: String { eventName.hasPrefix("s3:") ? String(eventName.dropFirst(3)) : eventName }

        /// Lenient for other S3 implementations: MinIO (`minio:s3`, `s3:` event
        /// names, no `x-amz-id-2`) and Ceph (`ceph:s3`, sizes as strings, raw keys)
        /// leave out or reshape fields AWS always sends; those get neutral values.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            eventVersion = try c.decodeIfPresent(String.self, forKey: .eventVersion) ?? "2.1"
            eventSource = try c.decodeIfPresent(String.self, forKey: .eventSource) ?? "aws:s3"
            awsRegion = try c.decodeIfPresent(String.self, forKey: .awsRegion) ?? ""
            eventTime = try c.decodeIfPresent(String.self, forKey: .eventTime) ?? ""
            eventName = try c.decode(String.self, forKey: .eventName)
            userIdentity = try c.decodeIfPresent(UserIdentity.self, forKey: .userIdentity) ?? .init(principalId: "")
            requestParameters = try c.decodeIfPresent(RequestParameters.self, forKey: .requestParameters) ?? .init(sourceIPAddress: "")
            responseElements = try c.decodeIfPresent(ResponseElements.self, forKey: .responseElements) ?? .init(requestId: "", id2: "")
            s3 = try c.decode(Entity.self, forKey: .s3)
        }

        enum CodingKeys: String, CodingKey {
            case eventVersion, eventSource, awsRegion, eventTime, eventName, userIdentity, requestParameters, responseElements, s3
        }
    }

    public struct UserIdentity: Sendable, Codable, Hashable {
        public var principalId: String
        public init(principalId: String) { self.principalId = principalId }
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            principalId = try c.decodeIfPresent(String.self, forKey: .principalId) ?? ""
        }
        enum CodingKeys: String, CodingKey { case principalId }
    }

    public struct RequestParameters: Sendable, Codable, Hashable {
        public var sourceIPAddress: String
        public init(sourceIPAddress: String) { self.sourceIPAddress = sourceIPAddress }
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            sourceIPAddress = try c.decodeIfPresent(String.self, forKey: .sourceIPAddress) ?? ""
        }
        enum CodingKeys: String, CodingKey { case sourceIPAddress }
    }

    public struct ResponseElements: Sendable, Codable, Hashable {
        public var requestId: String
        public var id2: String
        public init(requestId: String, id2: String) { self.requestId = requestId; self.id2 = id2 }
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            requestId = try c.decodeIfPresent(String.self, forKey: .requestId) ?? ""
            id2 = try c.decodeIfPresent(String.self, forKey: .id2) ?? ""
        }
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
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            s3SchemaVersion = try c.decodeIfPresent(String.self, forKey: .s3SchemaVersion) ?? "1.0"
            configurationId = try c.decodeIfPresent(String.self, forKey: .configurationId) ?? ""
            bucket = try c.decode(Bucket.self, forKey: .bucket)
            object = try c.decode(Object.self, forKey: .object)
        }
        enum CodingKeys: String, CodingKey { case s3SchemaVersion, configurationId, bucket, object }
    }

    public struct Bucket: Sendable, Codable, Hashable {
        public var name: String
        public var ownerIdentity: UserIdentity
        public var arn: String
        public init(name: String, ownerIdentity: UserIdentity, arn: String? = nil) {
            self.name = name; self.ownerIdentity = ownerIdentity; self.arn = arn ?? "arn:aws:s3:::\(name)"
        }
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            name = try c.decode(String.self, forKey: .name)
            ownerIdentity = try c.decodeIfPresent(UserIdentity.self, forKey: .ownerIdentity) ?? .init(principalId: "")
            arn = try c.decodeIfPresent(String.self, forKey: .arn) ?? "arn:aws:s3:::\(name)"
        }
        enum CodingKeys: String, CodingKey { case name, ownerIdentity, arn }
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

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            key = try c.decode(String.self, forKey: .key)
            // Ceph writes the size as a string.
            if let number = try? c.decodeIfPresent(Int64.self, forKey: .size) {
                size = number
            } else if let text = try? c.decodeIfPresent(String.self, forKey: .size) {
                size = Int64(text)
            }
            eTag = try c.decodeIfPresent(String.self, forKey: .eTag)
            versionId = try c.decodeIfPresent(String.self, forKey: .versionId)
            sequencer = try c.decodeIfPresent(String.self, forKey: .sequencer)
        }
        enum CodingKeys: String, CodingKey { case key, size, eTag, versionId, sequencer }

        /// The key as stored in S3. A key that is not valid form encoding (a
        /// space, or `%` without two hex digits: Ceph sends raw keys) is taken as is.
        public var decodedKey: String { FormURLEncoding.isEncoded(key) ? FormURLEncoding.decode(key) : key }
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
                out += "%" + Digits.upperHex(UInt64(byte), width: 2)
            }
        }
        return out
    }

    /// Whether `s` can be the output of `encode` (only unreserved bytes, `+` and `%XX`).
    public static func isEncoded(_ s: String) -> Bool {
        let bytes = Array(s.utf8)
        var i = 0
        while i < bytes.count {
            let byte = bytes[i]
            if byte == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, Digits.hexValue(bytes[i + 1]) != nil, Digits.hexValue(bytes[i + 2]) != nil else { return false }
                i += 3
                continue
            }
            if byte == UInt8(ascii: " ") || byte >= 0x80 { return false }
            i += 1
        }
        return true
    }

    /// `+` becomes a space and `%XX` its byte. A malformed `%` sequence, or
    /// bytes that are not UTF-8, leave the `%` sequences as they are (only `+`
    /// decoded), so nothing is lost (Foundation's decoding put U+FFFD for some).
    /// Byte by byte: Foundation's `removingPercentEncoding` was 1 % of a worker's
    /// CPU in the pipeline benchmark (every S3 trigger match decodes a key).
    public static func decode(_ s: String) -> String {
        let bytes = Array(s.utf8)
        guard bytes.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "%") }) else { return s }
        let plusOnly = { String(decoding: bytes.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: " ") : $0 }, as: UTF8.self) }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, let high = Digits.hexValue(bytes[i + 1]), let low = Digits.hexValue(bytes[i + 2]) else { return plusOnly() }
                decoded.append(high << 4 | low)
                i += 3
            } else {
                decoded.append(bytes[i] == UInt8(ascii: "+") ? UInt8(ascii: " ") : bytes[i])
                i += 1
            }
        }
        return String(validating: decoded, as: UTF8.self) ?? plusOnly()
    }
}

/// The message S3 sends once when a notification configuration is saved
/// (`{"Service":"Amazon S3","Event":"s3:TestEvent",…}`); it carries no records.
public struct S3TestEvent: Sendable, Codable, Hashable {
    public var service: String
    public var event: String
    public var time: String?
    public var bucket: String?
    public var requestId: String?
    public var hostId: String?

    enum CodingKeys: String, CodingKey {
        case service = "Service", event = "Event", time = "Time", bucket = "Bucket", requestId = "RequestId", hostId = "HostId"
    }

    /// The test event in `bytes`, or nil when they are something else.
    public static func detect(_ bytes: some Sequence<UInt8>) -> S3TestEvent? {
        guard let test = try? JSONDecoder().decode(S3TestEvent.self, from: Data(bytes)), test.event == "s3:TestEvent" else { return nil }
        return test
    }
}
