import Foundation

/// A stream record written straight to JSON bytes, member by member in the
/// order of its synthesized `encode(to:)`. Several records go out per request;
/// through Codable (one-pass encoder or not) they were 6 % of the worker's CPU
/// in the pipeline benchmark (S5), most of it generic dispatch, not writing.
/// The output is byte for byte `StreamingJSONEncoder`'s (StreamRecordJSONTests).
extension DynamoDBEvent.Record {
    public struct NonFiniteNumber: Error, CustomStringConvertible {
        public var description: String { "ApproximateCreationDateTime is not a finite number" }
    }

    /// This record as JSON. Throws only for a non-finite creation time, which JSON cannot hold.
    public func jsonBytes() throws -> [UInt8] {
        var out = RecordWriter()
        try out.record(self)
        return out.bytes
    }
}

extension DynamoDBEvent {
    /// The batch as a handler receives it: `{"Records":[…]}`.
    public func jsonBytes() throws -> [UInt8] {
        var out = RecordWriter()
        out.raw("{\"Records\":[")
        for (index, record) in records.enumerated() {
            if index > 0 { out.comma() }
            try out.record(record)
        }
        out.raw("]}")
        return out.bytes
    }
}

private struct RecordWriter {
    var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(1024) }

    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func comma() { bytes.append(UInt8(ascii: ",")) }

    mutating func string(_ value: String) { JSONText.append(string: value, to: &bytes) }

    /// `,"name":` (or without the comma for an object's first member).
    mutating func key(_ name: String, first: Bool = false) {
        if !first { comma() }
        string(name)
        bytes.append(UInt8(ascii: ":"))
    }

    mutating func record(_ record: DynamoDBEvent.Record) throws {
        raw("{")
        key("eventID", first: true); string(record.eventID)
        key("eventName"); string(record.eventName.rawValue)
        key("eventVersion"); string(record.eventVersion)
        key("eventSource"); string(record.eventSource)
        key("awsRegion"); string(record.awsRegion)
        key("eventSourceARN"); string(record.eventSourceARN)
        if let identity = record.userIdentity {
            key("userIdentity")
            raw("{")
            key("type", first: true); string(identity.type)
            key("principalId"); string(identity.principalId)
            raw("}")
        }
        key("dynamodb")
        try streamRecord(record.dynamodb)
        raw("}")
    }

    mutating func streamRecord(_ record: StreamRecord) throws {
        raw("{")
        var first = true
        if let time = record.approximateCreationDateTime {
            guard let text = JSONText.number(time) else { throw DynamoDBEvent.Record.NonFiniteNumber() }
            key("ApproximateCreationDateTime", first: true)
            bytes.append(contentsOf: text.utf8)
            first = false
        }
        key("Keys", first: first); map(record.keys)
        if let image = record.newImage { key("NewImage"); map(image) }
        if let image = record.oldImage { key("OldImage"); map(image) }
        key("SequenceNumber"); string(record.sequenceNumber)
        key("SizeBytes"); bytes.append(contentsOf: String(record.sizeBytes).utf8)
        key("StreamViewType"); string(record.streamViewType.rawValue)
        raw("}")
    }

    mutating func map(_ map: AttributeMap) {
        raw("{")
        var first = true
        for (name, value) in map {
            key(name, first: first)
            first = false
            attribute(value)
        }
        raw("}")
    }

    mutating func strings(_ values: [String]) {
        raw("[")
        for (index, value) in values.enumerated() {
            if index > 0 { comma() }
            string(value)
        }
        raw("]")
    }

    /// `{"<tag>":value}`, as `AttributeValue.encode(to:)` writes it.
    mutating func attribute(_ value: AttributeValue) {
        switch value {
        case .string(let text): raw("{\"S\":"); string(text)
        case .number(let digits): raw("{\"N\":"); string(digits)
        case .binary(let data): raw("{\"B\":"); string(Data(data).base64EncodedString())
        case .stringSet(let values): raw("{\"SS\":"); strings(values)
        case .numberSet(let values): raw("{\"NS\":"); strings(values)
        case .binarySet(let values): raw("{\"BS\":"); strings(values.map { Data($0).base64EncodedString() })
        case .map(let inner): raw("{\"M\":"); map(inner)
        case .list(let items):
            raw("{\"L\":[")
            for (index, item) in items.enumerated() {
                if index > 0 { comma() }
                attribute(item)
            }
            raw("]")
        case .null: raw("{\"NULL\":true")
        case .bool(let flag): raw(flag ? "{\"BOOL\":true" : "{\"BOOL\":false")
        }
        raw("}")
    }
}
