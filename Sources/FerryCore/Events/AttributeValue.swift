import Foundation

/// A DynamoDB value in its JSON form, `{"<type tag>": value}`: the ten tags
/// DynamoDB streams carry. Numbers stay strings (`{"N":"12.50"}`) so no
/// precision is lost; binary values are base64 in JSON and bytes here.
public enum AttributeValue: Sendable, Hashable, Codable, CustomStringConvertible {
    case string(String)
    case number(String)
    case binary([UInt8])
    case stringSet([String])
    case numberSet([String])
    case binarySet([[UInt8]])
    case map([String: AttributeValue])
    case list([AttributeValue])
    case null
    case bool(Bool)

    /// The JSON type tags, as DynamoDB spells them.
    enum Tag: String, CodingKey, CaseIterable {
        case S, N, B, SS, NS, BS, M, L, NULL, BOOL
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Tag.self)
        guard container.allKeys.count == 1, let tag = container.allKeys.first else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                debugDescription: "an AttributeValue has exactly one of the tags \(Tag.allCases.map(\.rawValue))"))
        }
        func bytes(_ text: String) throws -> [UInt8] {
            guard let data = Data(base64Encoded: text) else {
                throw DecodingError.dataCorruptedError(forKey: tag, in: container, debugDescription: "binary value is not base64")
            }
            return Array(data)
        }
        switch tag {
        case .S: self = .string(try container.decode(String.self, forKey: tag))
        case .N: self = .number(try Self.numberText(container, tag))
        case .B: self = .binary(try bytes(try container.decode(String.self, forKey: tag)))
        case .SS: self = .stringSet(try container.decode([String].self, forKey: tag))
        case .NS: self = .numberSet(try container.decode([String].self, forKey: tag))
        case .BS: self = .binarySet(try container.decode([String].self, forKey: tag).map(bytes))
        case .M: self = .map(try container.decode([String: AttributeValue].self, forKey: tag))
        case .L: self = .list(try container.decode([AttributeValue].self, forKey: tag))
        case .NULL: _ = try container.decode(Bool.self, forKey: tag); self = .null
        case .BOOL: self = .bool(try container.decode(Bool.self, forKey: tag))
        }
    }

    /// DynamoDB writes numbers as strings; a bare JSON number is accepted too.
    private static func numberText(_ container: KeyedDecodingContainer<Tag>, _ tag: Tag) throws -> String {
        if let text = try? container.decode(String.self, forKey: tag) { return text }
        if let integer = try? container.decode(Int64.self, forKey: tag) { return String(integer) }
        return String(try container.decode(Double.self, forKey: tag))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Tag.self)
        switch self {
        case .string(let value): try container.encode(value, forKey: .S)
        case .number(let value): try container.encode(value, forKey: .N)
        case .binary(let value): try container.encode(Data(value).base64EncodedString(), forKey: .B)
        case .stringSet(let value): try container.encode(value, forKey: .SS)
        case .numberSet(let value): try container.encode(value, forKey: .NS)
        case .binarySet(let value): try container.encode(value.map { Data($0).base64EncodedString() }, forKey: .BS)
        case .map(let value): try container.encode(value, forKey: .M)
        case .list(let value): try container.encode(value, forKey: .L)
        case .null: try container.encode(true, forKey: .NULL)
        case .bool(let value): try container.encode(value, forKey: .BOOL)
        }
    }

    public static func number<N: BinaryInteger>(_ value: N) -> AttributeValue { .number(String(value)) }

    /// The string of `S`, the digits of `N`.
    public var stringValue: String? {
        switch self {
        case .string(let s), .number(let s): return s
        default: return nil
        }
    }

    public var description: String {
        (try? FerryJSON.encodeSorted(self)).map { String(decoding: $0, as: UTF8.self) } ?? "?"
    }
}

/// An item (or a key): attribute name → value.
public typealias AttributeMap = [String: AttributeValue]
