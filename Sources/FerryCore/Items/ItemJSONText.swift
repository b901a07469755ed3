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
    /// an item: at most `maxDepth` levels, attribute names of 1–255 bytes,
    /// numbers by `DynamoNumber`. Throws `InvalidRequest` naming the attribute.
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
        var out: [UInt8] = []
        try write(.map(map), field: field, depth: -1, shown: shown, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    private static func write(_ value: AttributeValue, field: String, depth: Int, shown: Bool, to out: inout [UInt8]) throws(FerryError) {
        guard depth <= maxDepth else {
            throw FerryError(.invalidRequest, "'\(field)' is nested deeper than \(maxDepth) levels")
        }
        switch value {
        case .string(let s): JSONText.append(string: s, to: &out)
        case .number(let n):
            do {
                out += try DynamoNumber.canonical(Array(n.utf8), field: field).utf8
            } catch where shown {
                JSONText.append(string: n, to: &out)
            }
        case .binary(let b): JSONText.append(string: Data(b).base64EncodedString(), to: &out)
        case .bool(let b): out += (b ? "true" : "false").utf8
        case .null: out += "null".utf8
        case .stringSet(let set): try write(.list(set.map(AttributeValue.string)), field: field, depth: depth, shown: shown, to: &out)
        case .numberSet(let set): try write(.list(set.map(AttributeValue.number)), field: field, depth: depth, shown: shown, to: &out)
        case .binarySet(let set): try write(.list(set.map(AttributeValue.binary)), field: field, depth: depth, shown: shown, to: &out)
        case .list(let list):
            out.append(UInt8(ascii: "["))
            for (index, element) in list.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                try write(element, field: "\(field)[\(index)]", depth: depth + 1, shown: shown, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .map(let map):
            out.append(UInt8(ascii: "{"))
            for (index, (name, element)) in map.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSONText.append(string: name, to: &out)
                out.append(UInt8(ascii: ":"))
                try write(element, field: Reader.member(field, name), depth: depth + 1, shown: shown, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// An open object or array while its members are read (its contents are
    /// kept apart, in `maps` and `lists`, so adding one is done in place: an
    /// object of n members must not be copied n times).
    private enum Open {
        case object(field: String, name: String)
        case list(field: String)
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

        /// `"name":`; a name is 1–255 bytes.
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
            var maps: [AttributeMap] = []
            var lists: [[AttributeValue]] = []
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
                    stack.append(.object(field: field, name: name))
                    maps.append([:])
                    field = Self.member(field, name)
                    continue
                case UInt8(ascii: "["):
                    index += 1
                    skipWhitespace()
                    if peek == UInt8(ascii: "]") { index += 1; done = .list([]); break }
                    stack.append(.list(field: field))
                    lists.append([])
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
                closing: while true {
                    guard let open = stack.last else {
                        skipWhitespace()
                        guard index == end else { throw broken() }
                        return done
                    }
                    skipWhitespace()
                    let isObject = if case .object = open { true } else { false }
                    guard let next = peek, next == UInt8(ascii: ",") || next == UInt8(ascii: isObject ? "}" : "]") else { throw broken() }
                    index += 1
                    let more = next == UInt8(ascii: ",")
                    switch open {
                    case .object(let parent, let name):
                        maps[maps.count - 1][name] = done
                        guard more else {
                            stack.removeLast()
                            (done, field) = (.map(maps.removeLast()), parent)
                            continue closing
                        }
                        let following = try memberName(in: parent)
                        stack[stack.count - 1] = .object(field: parent, name: following)
                        field = Self.member(parent, following)
                    case .list(let parent):
                        lists[lists.count - 1].append(done)
                        guard more else {
                            stack.removeLast()
                            (done, field) = (.list(lists.removeLast()), parent)
                            continue closing
                        }
                        field = "\(parent)[\(lists[lists.count - 1].count)]"
                    }
                    break closing
                }
            }
        }

        static func member(_ field: String, _ name: String) -> String { field.isEmpty ? name : "\(field).\(name)" }
    }
}
