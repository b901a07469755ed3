import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// `StreamingJSONEncoder` writes what `JSONEncoder` writes (as JSON values;
/// key order aside), for the contract types with hostile contents, for the
/// value shapes Codable allows, and falls back to `JSONEncoder` where one pass
/// cannot follow the containers.
@Suite struct StreamingJSONEncoderTests {
    static let reference: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }()

    /// Both encoders' output, parsed: equal as JSON values.
    func expectSame<T: Encodable>(_ value: T, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let fast = try StreamingJSONEncoder().encode(value)
        let slow = try Self.reference.encode(value)
        let a = try JSONSerialization.jsonObject(with: Data(fast), options: .fragmentsAllowed)
        let b = try JSONSerialization.jsonObject(with: slow, options: .fragmentsAllowed)
        #expect(Self.same(a, b), "\(String(decoding: fast, as: UTF8.self)) vs \(String(decoding: slow, as: UTF8.self))",
                sourceLocation: sourceLocation)
    }

    /// Equal as JSON values: objects key by key, arrays in order, numbers as numbers.
    static func same(_ a: Any, _ b: Any) -> Bool {
        switch (a, b) {
        case let (x as [String: Any], y as [String: Any]):
            return x.count == y.count && x.allSatisfy { key, value in y[key].map { same(value, $0) } ?? false }
        case let (x as [Any], y as [Any]):
            return x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
        case let (x as String, y as String): return x == y
        case (is NSNull, is NSNull): return true
        case let (x as NSNumber, y as NSNumber): return x == y
        default: return false
        }
    }

    /// For the contract types: both encoders' output decodes to the same value
    /// (Foundation's JSONSerialization on Linux merges some distinct keys, such
    /// as "" and "\u{FEFF}", so it cannot compare these with hostile keys).
    func expectSameDecoded<T: Codable & Equatable>(_ value: T, _ comment: Comment? = nil,
                                                  sourceLocation: SourceLocation = #_sourceLocation) throws {
        let fast = try JSONDecoder().decode(T.self, from: Data(StreamingJSONEncoder().encode(value)))
        let slow = try JSONDecoder().decode(T.self, from: Self.reference.encode(value))
        #expect(fast == slow, comment, sourceLocation: sourceLocation)
    }

    func text(_ rng: inout SeededGenerator) -> String {
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: return HostileInput.key(&rng)
        case 1: return HostileInput.headerValue(&rng)
        case 2: return String((0..<Int.random(in: 0...40, using: &rng)).map { _ in
            Character(Unicode.Scalar(UInt8.random(in: 0...127, using: &rng))) })
        default: return HostileInput.pieces.randomElement(using: &rng)!
        }
    }

    func attribute(_ rng: inout SeededGenerator, depth: Int = 0) -> AttributeValue {
        switch Int.random(in: 0..<(depth > 2 ? 7 : 10), using: &rng) {
        case 0: return .string(text(&rng))
        case 1: return .number(String(Int64.random(in: .min ... .max, using: &rng)))
        case 2: return .binary((0..<Int.random(in: 0...20, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
        case 3: return .stringSet((0..<Int.random(in: 0...3, using: &rng)).map { _ in text(&rng) })
        case 4: return .numberSet(["1", "-2.5", "1e3"])
        case 5: return .null
        case 6: return .bool(Bool.random(using: &rng))
        case 7: return .binarySet([[0, 1], []])
        case 8: return .map(Dictionary((0..<Int.random(in: 0...4, using: &rng)).map { _ in (text(&rng), attribute(&rng, depth: depth + 1)) },
                                       uniquingKeysWith: { a, _ in a }))
        default: return .list((0..<Int.random(in: 0...4, using: &rng)).map { _ in attribute(&rng, depth: depth + 1) })
        }
    }

    @Test func contractTypesWithGeneratedContents() throws {
        var rng = SeededGenerator(seed: 0x15_0E)
        for n in 0..<400 {
            let keys: AttributeMap = ["bucket": .string(text(&rng)), "key": .string(text(&rng))]
            let image = keys.merging((0..<Int.random(in: 0...6, using: &rng)).map { _ in (text(&rng), attribute(&rng)) }) { a, _ in a }
            let record = DynamoDBEvent.Record(
                eventID: text(&rng), eventName: [.insert, .modify, .remove].randomElement(using: &rng)!, awsRegion: "us-east-1",
                eventSourceARN: "arn:aws:dynamodb:us-east-1:000000000000:table/\(text(&rng))/stream/ferry",
                dynamodb: StreamRecord(approximateCreationDateTime: Double.random(in: 0...2e9, using: &rng), keys: keys,
                                       newImage: Bool.random(using: &rng) ? image : nil, oldImage: Bool.random(using: &rng) ? image : nil,
                                       sequenceNumber: String(UInt64.random(in: 0 ... .max, using: &rng)), streamViewType: .newAndOldImages))
            try expectSameDecoded(record, "record \(n)")
            try expectSameDecoded(DynamoDBEvent(records: [record, record]))

            var status = TransferStatus(id: text(&rng), op: Bool.random(using: &rng) ? "upload" : nil,
                                        state: [.accepted, .running, .completed, .failed].randomElement(using: &rng)!,
                                        bytesTransferred: Int64.random(in: 0 ... .max, using: &rng), attempt: Int.random(in: 1...5, using: &rng),
                                        worker: text(&rng), time: Date(timeIntervalSince1970: Double.random(in: 0...2e9, using: &rng)))
            if Bool.random(using: &rng) { status.object = .init(bucket: text(&rng), key: text(&rng), size: 5, eTag: "\"e\"", versionId: nil) }
            if Bool.random(using: &rng) { status.error = .init(FerryError(.accessDenied, text(&rng))) }
            try expectSameDecoded(status, "status \(n)")

            let event = S3Event(records: [S3Event.Record(
                awsRegion: "us-east-1", eventTime: Timestamp.iso8601(Date()), eventName: "ObjectCreated:Put",
                userIdentity: .init(principalId: text(&rng)), requestParameters: .init(sourceIPAddress: "127.0.0.1"),
                responseElements: .init(requestId: text(&rng), id2: text(&rng)),
                s3: .init(configurationId: text(&rng), bucket: .init(name: text(&rng), ownerIdentity: .init(principalId: text(&rng))),
                          object: .init(rawKey: text(&rng), size: Int64.random(in: 0...(1 << 40), using: &rng), eTag: text(&rng),
                                        sequencer: text(&rng))))])
            try expectSameDecoded(event, "event \(n)")
        }
    }

    struct Scalars: Encodable {
        var d: Double, f: Float, i8: Int8, i16: Int16, i32: Int32, u: UInt, u8: UInt8, u16: UInt16, u32: UInt32, u64: UInt64
        var date: Date, data: Data, url: URL, optional: Int?, nothing: String?, flag: Bool
        var nested: [String: [Int?]], empty: [String], emptyObject: [String: Int]
    }

    @Test func everyScalarAndShape() throws {
        var rng = SeededGenerator(seed: 0x5CA1)
        for _ in 0..<300 {
            let value = Scalars(
                d: [0, -0.0, 1, 0.1, 1e21, 1e-7, .leastNonzeroMagnitude, .greatestFiniteMagnitude, Double.random(in: -1e300...1e300, using: &rng)].randomElement(using: &rng)!,
                f: Float.random(in: -1e30...1e30, using: &rng), i8: .random(in: .min ... .max, using: &rng), i16: .random(in: .min ... .max, using: &rng),
                i32: .random(in: .min ... .max, using: &rng), u: .random(in: .min ... .max, using: &rng), u8: .random(in: .min ... .max, using: &rng),
                u16: .random(in: .min ... .max, using: &rng), u32: .random(in: .min ... .max, using: &rng), u64: .random(in: .min ... .max, using: &rng),
                date: Date(timeIntervalSinceReferenceDate: Double.random(in: -1e9...1e9, using: &rng)),
                data: Data((0..<Int.random(in: 0...30, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }),
                url: URL(string: "https://example.com/a/\(Int.random(in: 0...99, using: &rng))?q=1")!,
                optional: Bool.random(using: &rng) ? 3 : nil, nothing: nil, flag: Bool.random(using: &rng),
                nested: ["a": [1, nil, 3], text(&rng): []], empty: [], emptyObject: [:])
            try expectSame(value)
        }
        // Slashes are written as they are, as the contracts' encoder writes them.
        #expect(try StreamingJSONEncoder().encode("a/b") == Array(#""a/b""#.utf8))
        try expectSame([1, 2, 3])
        try expectSame("top level string")
        try expectSame(Optional<Int>.none)
        try expectSame([[String: Int]]())
    }

    /// Containers used in ways one pass cannot follow: the value comes out as JSONEncoder writes it.
    struct KeepsNestedForLater: Encodable {
        enum Keys: String, CodingKey { case a, b, c }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            var late = container.nestedContainer(keyedBy: Keys.self, forKey: .a)
            try container.encode(1, forKey: .b)
            try late.encode("written after its parent moved on", forKey: .c)
        }
    }

    struct UsesSuperEncoder: Encodable {
        enum Keys: String, CodingKey { case a }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(1, forKey: .a)
            var superContainer = container.superEncoder().singleValueContainer()
            try superContainer.encode("base")
        }
    }

    struct TwoContainers: Encodable {
        enum Keys: String, CodingKey { case a, b }
        func encode(to encoder: any Encoder) throws {
            var first = encoder.container(keyedBy: Keys.self)
            try first.encode(1, forKey: .a)
            var second = encoder.container(keyedBy: Keys.self)
            try second.encode(2, forKey: .b)
        }
    }

    struct EncodesNothing: Encodable { func encode(to encoder: any Encoder) throws {} }

    @Test func outOfOrderContainersFallBackToJSONEncoder() throws {
        for value in [AnyEncodable(KeepsNestedForLater()), AnyEncodable(UsesSuperEncoder()), AnyEncodable(TwoContainers()),
                      AnyEncodable(["wraps": KeepsNestedForLater()]), AnyEncodable(["x": EncodesNothing()])] {
            try expectSame(value)
        }
        // Errors are JSONEncoder's own: a non-finite number, a top level that encodes nothing.
        #expect(throws: EncodingError.self) { try StreamingJSONEncoder().encode([Double.nan]) }
        #expect(throws: EncodingError.self) { try StreamingJSONEncoder().encode(["x": Double.infinity]) }
        #expect(throws: EncodingError.self) { try StreamingJSONEncoder().encode(EncodesNothing()) }
    }

    struct AnyEncodable: Encodable {
        let value: any Encodable
        init(_ value: any Encodable) { self.value = value }
        func encode(to encoder: any Encoder) throws { try value.encode(to: encoder) }
    }
}
