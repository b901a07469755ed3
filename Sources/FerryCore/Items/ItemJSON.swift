import Foundation

/// Items arrive as plain JSON, as AppSync mutations write them, and are kept
/// and streamed as DynamoDB `AttributeValue`s: strings `S`, numbers `N` (their
/// JSON text), booleans `BOOL`, null `NULL`, arrays `L`, objects `M`.
public enum ItemJSON {
    /// DynamoDB's nesting limit for documents.
    public static let maxDepth = 32

    /// Converts a value from `JSONSerialization`; throws `InvalidRequest` for a
    /// value nested deeper than `maxDepth` or one JSON cannot name.
    public static func attribute(_ value: Any, field: String, depth: Int = 0) throws(FerryError) -> AttributeValue {
        guard depth <= maxDepth else {
            throw FerryError(.invalidRequest, "'\(field)' is nested deeper than \(maxDepth) levels")
        }
        switch value {
        case is NSNull:
            return .null
        case let text as String:
            return .string(text)
        case let number as NSNumber:
            // JSONSerialization gives booleans as NSNumber too, of ObjC type `c` (it makes no other `c` numbers).
            if String(cString: number.objCType) == "c" { return .bool(number.boolValue) }
            let double = number.doubleValue
            guard double.isFinite else { throw FerryError(.invalidRequest, "'\(field)' is not a finite number") }
            return .number(number.stringValue)
        case let list as [Any]:
            var out: [AttributeValue] = []
            out.reserveCapacity(list.count)
            for (index, element) in list.enumerated() {
                out.append(try attribute(element, field: "\(field)[\(index)]", depth: depth + 1))
            }
            return .list(out)
        case let object as [String: Any]:
            return .map(try map(object, field: field, depth: depth + 1))
        default:
            throw FerryError(.invalidRequest, "'\(field)' holds a value JSON cannot name")
        }
    }

    public static func map(_ object: [String: Any], field: String, depth: Int = 0) throws(FerryError) -> AttributeMap {
        var out: AttributeMap = [:]
        for (name, value) in object {
            guard !name.isEmpty, name.utf8.count <= 255 else {
                throw FerryError(.invalidRequest, "attribute names in '\(field)' are 1–255 bytes")
            }
            out[name] = try attribute(value, field: field.isEmpty ? name : "\(field).\(name)", depth: depth)
        }
        return out
    }

    /// The plain JSON form of an attribute, for people and for `ferry items get`.
    public static func plain(_ value: AttributeValue) -> Any {
        switch value {
        case .string(let s): return s
        case .number(let n): return Decimal(string: n).map { NSDecimalNumber(decimal: $0) } ?? n
        case .binary(let b): return Data(b).base64EncodedString()
        case .stringSet(let s): return s
        case .numberSet(let n): return n
        case .binarySet(let b): return b.map { Data($0).base64EncodedString() }
        case .map(let m): return m.mapValues(plain)
        case .list(let l): return l.map(plain)
        case .null: return NSNull()
        case .bool(let b): return b
        }
    }
}
