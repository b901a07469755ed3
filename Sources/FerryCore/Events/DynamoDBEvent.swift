import Foundation

/// A batch of DynamoDB stream records, in the JSON shape Lambda delivers to a
/// stream handler, so a handler written for Lambda reads it unchanged.
public struct DynamoDBEvent: Sendable, Codable, Hashable {
    public var records: [Record]

    public init(records: [Record]) { self.records = records }

    enum CodingKeys: String, CodingKey { case records = "Records" }

    public enum EventName: String, Sendable, Codable, Hashable {
        case insert = "INSERT", modify = "MODIFY", remove = "REMOVE"
    }

    /// One change to one item.
    public struct Record: Sendable, Codable, Hashable {
        /// Unique per change; redeliveries of a change carry the same id.
        public var eventID: String
        public var eventName: EventName
        public var eventVersion: String
        public var eventSource: String
        public var awsRegion: String
        public var eventSourceARN: String
        /// Set on changes the service made itself (Ferry: expiry of a `transfers` item).
        public var userIdentity: UserIdentity?
        public var dynamodb: StreamRecord

        public init(eventID: String, eventName: EventName, eventVersion: String = "1.1", eventSource: String = "aws:dynamodb",
                    awsRegion: String, eventSourceARN: String, userIdentity: UserIdentity? = nil, dynamodb: StreamRecord) {
            self.eventID = eventID; self.eventName = eventName; self.eventVersion = eventVersion
            self.eventSource = eventSource; self.awsRegion = awsRegion; self.eventSourceARN = eventSourceARN
            self.userIdentity = userIdentity; self.dynamodb = dynamodb
        }

        /// The Kafka key of the record on `<prefix>.streams`: `<table>/<item key>`,
        /// so one item's records share a partition and keep their order.
        public var kafkaKey: String { "\(tableName ?? "-")/\(dynamodb.itemKey)" }

        /// The table name inside `eventSourceARN` (`…:table/<name>/stream/…`).
        public var tableName: String? {
            // On the UTF-8 bytes: Foundation's range(of:) was 1.7 % of a worker's CPU (every record is keyed by it).
            let arn = Array(eventSourceARN.utf8), marker = Array(":table/".utf8)
            guard arn.count >= marker.count,
                  let start = (0...(arn.count - marker.count)).first(where: { arn[$0..<($0 + marker.count)].elementsEqual(marker) })
            else { return nil }
            // The first non-empty `/`-separated part after it (as split(separator:) gives it).
            let name = arn[(start + marker.count)...].drop { $0 == UInt8(ascii: "/") }.prefix { $0 != UInt8(ascii: "/") }
            return name.isEmpty ? nil : String(decoding: name, as: UTF8.self)
        }
    }

    public struct UserIdentity: Sendable, Codable, Hashable {
        public var type: String
        public var principalId: String
        public init(type: String, principalId: String) { self.type = type; self.principalId = principalId }
        /// What DynamoDB writes for deletions by time to live.
        public static let service = UserIdentity(type: "Service", principalId: "dynamodb.amazonaws.com")
    }
}

/// The `dynamodb` member of a stream record.
public struct StreamRecord: Sendable, Codable, Hashable {
    /// Seconds since 1970 (DynamoDB rounds to the second; Ferry keeps milliseconds).
    public var approximateCreationDateTime: Double?
    public var keys: AttributeMap
    public var newImage: AttributeMap?
    public var oldImage: AttributeMap?
    /// 21–40 digits; grows per item key, so records of one item can be ordered.
    public var sequenceNumber: String
    public var sizeBytes: Int
    public var streamViewType: StreamViewType

    enum CodingKeys: String, CodingKey {
        case approximateCreationDateTime = "ApproximateCreationDateTime", keys = "Keys", newImage = "NewImage"
        case oldImage = "OldImage", sequenceNumber = "SequenceNumber", sizeBytes = "SizeBytes"
        case streamViewType = "StreamViewType"
    }

    public init(approximateCreationDateTime: Double?, keys: AttributeMap, newImage: AttributeMap?, oldImage: AttributeMap?,
                sequenceNumber: String, sizeBytes: Int? = nil, streamViewType: StreamViewType) {
        self.approximateCreationDateTime = approximateCreationDateTime; self.keys = keys
        self.newImage = newImage; self.oldImage = oldImage; self.sequenceNumber = sequenceNumber
        self.streamViewType = streamViewType
        self.sizeBytes = sizeBytes ?? Self.approximateSize(keys, newImage, oldImage)
    }

    /// The item key as text: `bucket/key` for `objects`, the id for `transfers`
    /// (in general the key attributes' values, by attribute name).
    public var itemKey: String {
        if let bucket = keys["bucket"]?.stringValue, let key = keys["key"]?.stringValue { return "\(bucket)/\(key)" }
        return keys.sorted { $0.key < $1.key }.compactMap { $0.value.stringValue }.joined(separator: "/")
    }

    /// What the record would carry on a stream of `view` type.
    public func projected(to view: StreamViewType) -> StreamRecord {
        var copy = self
        copy.streamViewType = view
        switch view {
        case .keysOnly: copy.newImage = nil; copy.oldImage = nil
        case .newImage: copy.oldImage = nil
        case .oldImage: copy.newImage = nil
        case .newAndOldImages: break
        }
        copy.sizeBytes = Self.approximateSize(copy.keys, copy.newImage, copy.oldImage)
        return copy
    }

    /// Like DynamoDB's SizeBytes: names plus values of keys and images (UTF-8 bytes; numbers by digits).
    static func approximateSize(_ maps: AttributeMap?...) -> Int {
        func size(_ value: AttributeValue) -> Int {
            switch value {
            case .string(let s), .number(let s): return s.utf8.count
            case .binary(let b): return b.count
            case .stringSet(let v), .numberSet(let v): return v.reduce(0) { $0 + $1.utf8.count }
            case .binarySet(let v): return v.reduce(0) { $0 + $1.count }
            case .map(let m): return 3 + m.reduce(0) { $0 + $1.key.utf8.count + size($1.value) + 1 }
            case .list(let l): return 3 + l.reduce(0) { $0 + size($1) + 1 }
            case .null, .bool: return 1
            }
        }
        return maps.compactMap { $0 }.reduce(0) { total, map in total + map.reduce(0) { $0 + $1.key.utf8.count + size($1.value) } }
    }
}

/// What a stream's records carry besides the keys.
public enum StreamViewType: String, Sendable, Codable, Hashable, CaseIterable {
    case keysOnly = "KEYS_ONLY", newImage = "NEW_IMAGE", oldImage = "OLD_IMAGE", newAndOldImages = "NEW_AND_OLD_IMAGES"
}

/// What a stream handler returns with ReportBatchItemFailures: the records
/// that failed, by `eventID` (Lambda's `StreamsEventResponse`). An empty list
/// means the whole batch succeeded.
public struct StreamBatchResponse: Sendable, Codable, Hashable {
    public struct Failure: Sendable, Codable, Hashable {
        public var itemIdentifier: String
        public init(itemIdentifier: String) { self.itemIdentifier = itemIdentifier }
    }

    public var batchItemFailures: [Failure]

    public init(batchItemFailures: [Failure] = []) { self.batchItemFailures = batchItemFailures }
    public init(failedEventIDs: [String]) { batchItemFailures = failedEventIDs.map(Failure.init) }

    public static let success = StreamBatchResponse()
}
