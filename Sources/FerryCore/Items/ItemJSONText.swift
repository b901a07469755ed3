import Foundation

/// Items arrive as plain JSON, as AppSync mutations write them, and are kept
/// and streamed as DynamoDB `AttributeValue`s: strings `S`, numbers `N`,
/// booleans `BOOL`, null `NULL`, arrays `L`, objects `M`. This reads that
/// text into `AttributeValue`s and writes it back.
///
/// Read from the request's own bytes rather than through `JSONSerialization`,
/// which keeps a number as a binary float or a 38-digit decimal: it cut a
/// 43-digit number to 38 digits, made `1e-400` zero and `1E2` `100.0`, all in
/// silence. Here each number's text goes through `DynamoNumber`: exactly
/// what was written, in its canonical form, or a refusal.
public enum ItemJSONText {
    /// DynamoDB's nesting limit for documents.
    public static let maxDepth = 32

    /// The object at `range` of `bytes` (text `StrictJSON.check` accepted) as
    /// an item: the rules of `ItemJSON` (depth, attribute names) and
    /// `DynamoNumber`. Throws `InvalidRequest` naming the attribute.
    public static func map(_ bytes: [UInt8], at range: Range<Int>, field: String) throws(FerryError) -> AttributeMap {
        var reader = Reader(bytes: bytes, index: range.lowerBound, end: range.upperBound)
        guard case .map(let map) = try reader.value(field: field) else {
            throw FerryError(.invalidRequest, "'\(field)' must be a JSON object")
        }
        return map
    }

    /// A whole text holding one object (a command-line option, say).
    public static func map(_ text: String, field: String) throws(FerryError) -> AttributeMap {
        let bytes = Array(text.utf8)
        if let problem = StrictJSON.check(bytes) { throw FerryError(.malformedRequest, problem.refusing(field)) }
        let start = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0  // a byte order mark, as StrictJSON allows
        return try map(bytes, at: start..<bytes.count, field: field)
    }

    /// The plain JSON text of an item, as a request carries it: numbers in
    /// their canonical form (exactly; `JSONSerialization` would write them
    /// through `Decimal`, which holds no exponent below -128), binary values
    /// as base64, sets as lists. Throws for a number DynamoDB refuses and for
    /// nesting deeper than `maxDepth`.
    ///
    /// `shown`: for people (`ferry items get`), a stored number DynamoDB would
    /// refuse (kept before numbers were checked) is shown as a string, not refused.
    public static func text(_ map: AttributeMap, field: String, shown: Bool = false) throws(FerryError) -> String {
        var out = ""
        try write(.map(map), field: field, depth: -1, shown: shown, to: &out)
        return out
    }

    private static func write(_ value: AttributeValue, field: String, depth: Int, shown: Bool, to out: inout String) throws(FerryError) {
        guard depth <= maxDepth else {
            throw FerryError(.invalidRequest, "'\(field)' is nested deeper than \(maxDepth) levels")
        }
        switch value {
        case .string(let s): quote(s, to: &out)
        case .number(let n):
            do {
                out += try DynamoNumber.canonical(Array(n.utf8), field: field)
            } catch where shown {
                quote(n, to: &out)
            }
        case .binary(let b): quote(Data(b).base64EncodedString(), to: &out)
        case .bool(let b): out += b ? "true" : "false"
        case .null: out += "null"
        case .stringSet(let set): try write(.list(set.map(AttributeValue.string)), field: field, depth: depth, shown: shown, to: &out)
        case .numberSet(let set): try write(.list(set.map(AttributeValue.number)), field: field, depth: depth, shown: shown, to: &out)
        case .binarySet(let set): try write(.list(set.map(AttributeValue.binary)), field: field, depth: depth, shown: shown, to: &out)
        case .list(let list):
            out += "["
            for (index, element) in list.enumerated() {
                if index > 0 { out += "," }
                try write(element, field: "\(field)[\(index)]", depth: depth + 1, shown: shown, to: &out)
            }
            out += "]"
        case .map(let map):
            out += "{"
            for (index, (name, element)) in map.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { out += "," }
                quote(name, to: &out)
                out += ":"
                try write(element, field: Reader.member(field, name), depth: depth + 1, shown: shown, to: &out)
            }
            out += "}"
        }
    }

    /// A JSON string: quotes, backslashes and control characters escaped.
    static func quote(_ text: String, to out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }

    /// An open object or array while its members are read.
    private enum Open {
        case object(AttributeMap, field: String, name: String)
        case list([AttributeValue], field: String)
    }

    private struct Reader {
        let bytes: [UInt8]
        var index: Int
        let end: Int

        var peek: UInt8? { index < end ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while let b = peek, b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D { index += 1 }
        }

        func broken() -> FerryError { FerryError(.malformedRequest, "the request is not valid JSON at byte \(index)") }

        /// A string's text (quotes included) ends here; its unescaped value.
        mutating func string() throws(FerryError) -> String {
            let start = index
            index += 1
            while let b = peek, b != UInt8(ascii: "\"") { index += b == UInt8(ascii: "\\") ? 2 : 1 }
            guard peek != nil else { throw broken() }
            index += 1
            guard let text = StrictJSON.string(in: bytes, at: start..<index) else { throw broken() }
            return text
        }

        /// `"name":`, with ItemJSON's rule for names.
        mutating func memberName(in field: String) throws(FerryError) -> String {
            skipWhitespace()
            guard peek == UInt8(ascii: "\"") else { throw broken() }
            let name = try string()
            guard !name.isEmpty, name.utf8.count <= 255 else {
                throw FerryError(.invalidRequest, "attribute names in '\(field)' are 1–255 bytes")
            }
            skipWhitespace()
            guard peek == UInt8(ascii: ":") else { throw broken() }
            index += 1
            return name
        }

        /// One value with everything in it, without recursion.
        mutating func value(field: String) throws(FerryError) -> AttributeValue {
            var stack: [Open] = []
            var field = field
            while true {
                skipWhitespace()
                // Values of the item's own attributes are at depth 0.
                guard stack.count - 1 <= maxDepth else {
                    throw FerryError(.invalidRequest, "'\(field)' is nested deeper than \(maxDepth) levels")
                }
                guard let byte = peek else { throw broken() }
                var done: AttributeValue
                switch byte {
                case UInt8(ascii: "{"):
                    index += 1
                    skipWhitespace()
                    if peek == UInt8(ascii: "}") { index += 1; done = .map([:]); break }
                    let name = try memberName(in: field)
                    stack.append(.object([:], field: field, name: name))
                    field = Self.member(field, name)
                    continue
                case UInt8(ascii: "["):
                    index += 1
                    skipWhitespace()
                    if peek == UInt8(ascii: "]") { index += 1; done = .list([]); break }
                    stack.append(.list([], field: field))
                    field = "\(field)[0]"
                    continue
                case UInt8(ascii: "\""):
                    done = .string(try string())
                case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
                    let word: [UInt8] = byte == UInt8(ascii: "t") ? Array("true".utf8) : byte == UInt8(ascii: "f") ? Array("false".utf8) : Array("null".utf8)
                    guard index + word.count <= end, bytes[index..<(index + word.count)].elementsEqual(word) else { throw broken() }
                    index += word.count
                    done = byte == UInt8(ascii: "n") ? .null : .bool(byte == UInt8(ascii: "t"))
                default:
                    let start = index
                    while let b = peek, (b >= 0x30 && b <= 0x39) || b == UInt8(ascii: "-") || b == UInt8(ascii: "+")
                        || b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E") { index += 1 }
                    guard index > start else { throw broken() }
                    done = .number(try DynamoNumber.canonical(bytes[start..<index], field: field))
                }
                // A value is complete: add it to its container, closing those it completes.
                while true {
                    guard var open = stack.popLast() else {
                        skipWhitespace()
                        guard index == end else { throw broken() }
                        return done
                    }
                    skipWhitespace()
                    let isObject = if case .object = open { true } else { false }
                    guard let next = peek, next == UInt8(ascii: ",") || next == UInt8(ascii: isObject ? "}" : "]") else { throw broken() }
                    let more = next == UInt8(ascii: ",")
                    index += 1
                    switch open {
                    case .object(var map, let parent, let name):
                        map[name] = done
                        if more {
                            let next = try memberName(in: parent)
                            open = .object(map, field: parent, name: next)
                            stack.append(open)
                            field = Self.member(parent, next)
                        } else {
                            field = parent
                            done = .map(map)
                        }
                    case .list(var list, let parent):
                        list.append(done)
                        if more {
                            field = "\(parent)[\(list.count)]"
                            stack.append(.list(list, field: parent))
                        } else {
                            field = parent
                            done = .list(list)
                        }
                    }
                    if more { break }
                }
            }
        }

        static func member(_ field: String, _ name: String) -> String { field.isEmpty ? name : "\(field).\(name)" }
    }
}
