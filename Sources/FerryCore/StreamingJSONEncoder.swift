import Foundation

/// Encodes `Encodable` values to JSON in one pass, writing each value as its
/// `encode(to:)` hands it over: no intermediate tree, no dictionary per object.
/// Foundation's `JSONEncoder` builds both; for the statuses, events and stream
/// records a worker publishes (several per request) it was 13 % of the
/// worker's CPU in the pipeline benchmark's profile (S5).
///
/// The output is what `JSONEncoder` with `.withoutEscapingSlashes` and its
/// default strategies writes (dates as seconds since 2001, data as base64,
/// non-finite numbers refused), except for the order of an object's keys,
/// which is the order they were encoded in (`JSONEncoder`'s is unspecified).
/// Codable allows a container to be written to after its parent moved on
/// (`nestedContainer` kept for later, `superEncoder`); one pass cannot, so such
/// a value is encoded by `JSONEncoder` instead, whole. Duplicate keys are written
/// as given (a `JSONEncoder` keeps the last).
public struct StreamingJSONEncoder: Sendable {
    private static let fallback: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }()

    public init() {}

    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        let writer = JSONStreamWriter()
        do {
            try writer.encodeValue(value, codingPath: [])
            try writer.finish()
            return writer.bytes
        } catch {
            // A container used out of order, a non-finite number, nothing encoded:
            // Foundation's encoder writes the value or throws its own error.
            return Array(try Self.fallback.encode(value))
        }
    }
}

/// The output and the containers still open, innermost last.
private final class JSONStreamWriter {
    enum Misuse: Error { case outOfOrder, nonFinite, nothingEncoded }

    struct Frame {
        let id: Int
        let closer: UInt8
        var count = 0
    }

    var bytes: [UInt8] = []
    var frames: [Frame] = []
    private var nextId = 0
    /// Set where Codable gives no way to throw (opening a nested container of a closed parent).
    var misused = false

    init() { bytes.reserveCapacity(1024) }

    func finish() throws {
        close(downTo: 0)
        guard !misused else { throw Misuse.outOfOrder }
        guard !bytes.isEmpty else { throw Misuse.nothingEncoded }
    }

    /// Readies frame `id` for a nested container's opening, or marks the output spoilt.
    func nestedElement(of id: Int, key: String?) {
        do {
            if let key { try self.key(key, in: id) } else { try nextElement(of: id) }
        } catch {
            misused = true
        }
    }

    /// Opens an object or array; returns its frame id.
    func open(_ opener: UInt8, _ closer: UInt8) -> Int {
        nextId += 1
        bytes.append(opener)
        frames.append(Frame(id: nextId, closer: closer))
        return nextId
    }

    /// Closes every frame above depth `depth`.
    func close(downTo depth: Int) {
        while frames.count > depth { bytes.append(frames.removeLast().closer) }
    }

    /// Readies frame `id` for its next element: closes the frames opened inside
    /// it, writes the separator. Throws when `id` was closed already.
    func nextElement(of id: Int) throws {
        guard let index = frames.lastIndex(where: { $0.id == id }) else { throw Misuse.outOfOrder }
        close(downTo: index + 1)
        if frames[index].count > 0 { bytes.append(UInt8(ascii: ",")) }
        frames[index].count += 1
    }

    func key(_ key: String, in id: Int) throws {
        try nextElement(of: id)
        string(key)
        bytes.append(UInt8(ascii: ":"))
    }

    func string(_ value: String) { JSONText.append(string: value, to: &bytes) }

    func literal(_ text: String) { bytes.append(contentsOf: text.utf8) }

    func integer<N: BinaryInteger>(_ value: N) { literal(String(value)) }

    /// As `JSONEncoder` writes them: the shortest form that reads back, without a trailing `.0`.
    func floatingPoint<F: BinaryFloatingPoint & LosslessStringConvertible>(_ value: F) throws {
        guard let text = JSONText.number(value) else { throw Misuse.nonFinite }
        literal(text)
    }

    /// Writes `value` where the caller has readied a place for it. Types are
    /// told apart by their metatypes (a pointer comparison): a chain of `as?`
    /// casts cost more than the encoding it saved.
    func encodeValue<T: Encodable>(_ value: T, codingPath: @autoclosure () -> [any CodingKey]) throws {
        if T.self == String.self { return string(value as! String) }
        if T.self == Int.self { return integer(value as! Int) }
        if T.self == Int64.self { return integer(value as! Int64) }
        if T.self == Bool.self { return literal(value as! Bool ? "true" : "false") }
        if T.self == Double.self { return try floatingPoint(value as! Double) }
        if T.self == Data.self { return string((value as! Data).base64EncodedString()) }
        if T.self == Date.self { return try floatingPoint((value as! Date).timeIntervalSinceReferenceDate) }
        if T.self == URL.self { return string((value as! URL).absoluteString) }
        // JSONEncoder's own number format.
        if T.self == Decimal.self { throw Misuse.outOfOrder }
        // Other integers and Float come back through their single value containers (`primitive`).
        let start = bytes.count, depth = frames.count
        // The path is built only here: a scalar never needs it.
        let encoder = StreamEncoder(writer: self, codingPath: codingPath())
        try value.encode(to: encoder)
        guard encoder.usedContainers <= 1 else { throw Misuse.outOfOrder }
        close(downTo: depth)
        // A value that encoded nothing is an empty object, as in JSONEncoder,
        // which refuses it at the top level.
        if bytes.count == start {
            guard start > 0 else { throw Misuse.nothingEncoded }
            literal("{}")
        }
    }

    /// The primitives a single value container is handed.
    func primitive<T: Encodable>(_ value: T) throws -> Bool {
        switch value {
        case let v as Int32: integer(v)
        case let v as Int16: integer(v)
        case let v as Int8: integer(v)
        case let v as UInt: integer(v)
        case let v as UInt64: integer(v)
        case let v as UInt32: integer(v)
        case let v as UInt16: integer(v)
        case let v as UInt8: integer(v)
        case let v as Float: try floatingPoint(v)
        default: return false
        }
        return true
    }
}

private final class StreamEncoder: Encoder {
    let writer: JSONStreamWriter
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    /// Containers asked of this encoder: a second one cannot be written in one pass.
    var usedContainers = 0

    init(writer: JSONStreamWriter, codingPath: [any CodingKey]) {
        self.writer = writer
        self.codingPath = codingPath
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        usedContainers += 1
        let id = writer.open(UInt8(ascii: "{"), UInt8(ascii: "}"))
        return KeyedEncodingContainer(StreamKeyedContainer<Key>(writer: writer, id: id, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        usedContainers += 1
        let id = writer.open(UInt8(ascii: "["), UInt8(ascii: "]"))
        return StreamUnkeyedContainer(writer: writer, id: id, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        usedContainers += 1
        return StreamSingleValueContainer(writer: writer, codingPath: codingPath)
    }
}

private struct StreamKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let writer: JSONStreamWriter
    let id: Int
    let codingPath: [any CodingKey]

    mutating func encodeNil(forKey key: Key) throws {
        try writer.key(key.stringValue, in: id)
        writer.literal("null")
    }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try writer.key(key.stringValue, in: id)
        try writer.encodeValue(value, codingPath: codingPath + [key])
    }

    // The types synthesized `encode(to:)` methods hand over most, written at once.
    mutating func encode(_ value: String, forKey key: Key) throws {
        try writer.key(key.stringValue, in: id)
        writer.string(value)
    }

    mutating func encode(_ value: Int, forKey key: Key) throws {
        try writer.key(key.stringValue, in: id)
        writer.integer(value)
    }

    mutating func encode(_ value: Int64, forKey key: Key) throws {
        try writer.key(key.stringValue, in: id)
        writer.integer(value)
    }

    mutating func encode(_ value: Bool, forKey key: Key) throws {
        try writer.key(key.stringValue, in: id)
        writer.literal(value ? "true" : "false")
    }

    mutating func encode(_ value: Double, forKey key: Key) throws {
        try writer.key(key.stringValue, in: id)
        try writer.floatingPoint(value)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type,
                                                        forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        writer.nestedElement(of: id, key: key.stringValue)
        let nested = writer.open(UInt8(ascii: "{"), UInt8(ascii: "}"))
        return KeyedEncodingContainer(StreamKeyedContainer<NestedKey>(writer: writer, id: nested, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        writer.nestedElement(of: id, key: key.stringValue)
        let nested = writer.open(UInt8(ascii: "["), UInt8(ascii: "]"))
        return StreamUnkeyedContainer(writer: writer, id: nested, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder { OutOfOrderEncoder(codingPath: codingPath) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { OutOfOrderEncoder(codingPath: codingPath) }
}

private struct StreamUnkeyedContainer: UnkeyedEncodingContainer {
    let writer: JSONStreamWriter
    let id: Int
    let codingPath: [any CodingKey]
    private(set) var count = 0

    init(writer: JSONStreamWriter, id: Int, codingPath: [any CodingKey]) {
        self.writer = writer; self.id = id; self.codingPath = codingPath
    }

    mutating func encodeNil() throws {
        try writer.nextElement(of: id)
        writer.literal("null")
        count += 1
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try writer.nextElement(of: id)
        try writer.encodeValue(value, codingPath: codingPath)
        count += 1
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        writer.nestedElement(of: id, key: nil)
        count += 1
        let nested = writer.open(UInt8(ascii: "{"), UInt8(ascii: "}"))
        return KeyedEncodingContainer(StreamKeyedContainer<NestedKey>(writer: writer, id: nested, codingPath: codingPath))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        writer.nestedElement(of: id, key: nil)
        count += 1
        let nested = writer.open(UInt8(ascii: "["), UInt8(ascii: "]"))
        return StreamUnkeyedContainer(writer: writer, id: nested, codingPath: codingPath)
    }

    mutating func superEncoder() -> any Encoder { OutOfOrderEncoder(codingPath: codingPath) }
}

private struct StreamSingleValueContainer: SingleValueEncodingContainer {
    let writer: JSONStreamWriter
    let codingPath: [any CodingKey]
    private var written = false

    init(writer: JSONStreamWriter, codingPath: [any CodingKey]) { self.writer = writer; self.codingPath = codingPath }

    mutating func encodeNil() throws {
        try once()
        writer.literal("null")
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try once()
        // Int8…UInt64 and Float end here, through their own encode(to:): written as they are.
        if try writer.primitive(value) { return }
        try writer.encodeValue(value, codingPath: codingPath)
    }

    /// A single value container holds one value.
    private mutating func once() throws {
        guard !written else { throw JSONStreamWriter.Misuse.outOfOrder }
        written = true
    }
}

/// What `superEncoder` hands out: writing through it would interleave with
/// the parent, so any use ends the one-pass attempt.
private struct OutOfOrderEncoder: Encoder {
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(RefusingKeyedContainer<Key>(codingPath: codingPath))
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { RefusingUnkeyedContainer(codingPath: codingPath) }
    func singleValueContainer() -> any SingleValueEncodingContainer { RefusingUnkeyedContainer(codingPath: codingPath) }
}

private struct RefusingKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let codingPath: [any CodingKey]
    mutating func encodeNil(forKey key: Key) throws { throw JSONStreamWriter.Misuse.outOfOrder }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { throw JSONStreamWriter.Misuse.outOfOrder }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(RefusingKeyedContainer<NestedKey>(codingPath: codingPath))
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { RefusingUnkeyedContainer(codingPath: codingPath) }
    mutating func superEncoder() -> any Encoder { OutOfOrderEncoder(codingPath: codingPath) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { OutOfOrderEncoder(codingPath: codingPath) }
}

private struct RefusingUnkeyedContainer: UnkeyedEncodingContainer, SingleValueEncodingContainer {
    let codingPath: [any CodingKey]
    var count: Int { 0 }
    mutating func encodeNil() throws { throw JSONStreamWriter.Misuse.outOfOrder }
    mutating func encode<T: Encodable>(_ value: T) throws { throw JSONStreamWriter.Misuse.outOfOrder }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(RefusingKeyedContainer<NestedKey>(codingPath: codingPath))
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
    mutating func superEncoder() -> any Encoder { OutOfOrderEncoder(codingPath: codingPath) }
}
