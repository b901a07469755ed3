/// JSON text held to RFC 8259, before Foundation reads it.
///
/// Foundation's readers are lenient where peers are not, and they disagree
/// with each other: both take `{"a":1,}`, and given `{"a":1,"a":2}`
/// `JSONDecoder` keeps the first value while `JSONSerialization` (and Python,
/// Go, JavaScript, jq) keep the last. A gateway that checks a request's
/// `identityId` the usual way would then approve one identity while Ferry
/// acted as another. So every JSON message Ferry takes from outside is
/// checked here first, and one that repeats a member name in any object, or
/// is not JSON at all, is refused: no reader can disagree about what it says.
///
/// Names count as the same when Swift's `String` says so (an escape such as
/// `\u0069` spells `i`; canonically equivalent Unicode is equal), since that
/// is how the decoders look members up.
public enum StrictJSON {
    public typealias Problem = JSONTextError

    /// Deeper than this is refused (Foundation's readers stop at 512 too).
    public static let maxDepth = 512

    /// nil when `bytes` is one JSON value (after an optional UTF-8 byte order
    /// mark) whose objects each name a member at most once.
    public static func check(_ bytes: [UInt8]) -> Problem? {
        bytes.withUnsafeBufferPointer { buffer -> Problem? in
            var scanner = Scanner(buffer, lenient: false)
            do throws(Problem) {
                scanner.skipByteOrderMark()
                scanner.skipWhitespace()
                try scanner.value()
                scanner.skipWhitespace()
                if scanner.index < buffer.count { throw scanner.problem("text after the JSON value") }
                return nil
            } catch {
                return error
            }
        }
    }

    /// One member of an object as the text has it, repeats included: its
    /// name, and where its value's bytes lie.
    public struct Member: Sendable {
        public var name: String
        public var value: Range<Int>
    }

    /// Every member of the object at `range` of `bytes` (the whole text when
    /// nil), in order, with repeated names and trailing commas allowed; nil
    /// when it is not an object. For code that must see every value a name
    /// has (redaction), whatever a decoder would pick.
    public static func members(of bytes: [UInt8], in range: Range<Int>? = nil) -> [Member]? {
        let range = range ?? 0..<bytes.count
        guard range.lowerBound >= 0, range.upperBound <= bytes.count else { return nil }
        return bytes.withUnsafeBufferPointer { whole -> [Member]? in
            let buffer = UnsafeBufferPointer(rebasing: whole[range])
            var scanner = Scanner(buffer, lenient: true)
            var members: [Member] = []
            do {
                if range.lowerBound == 0 { scanner.skipByteOrderMark() }
                scanner.skipWhitespace()
                try scanner.expect(UInt8(ascii: "{"), "an object")
                scanner.skipWhitespace()
                if scanner.peek == UInt8(ascii: "}") { return [] }
                while true {
                    scanner.skipWhitespace()
                    if scanner.peek == UInt8(ascii: "}") { return members }  // a trailing comma (lenient)
                    let name = try scanner.name()
                    scanner.skipWhitespace()
                    try scanner.expect(UInt8(ascii: ":"), "':'")
                    scanner.skipWhitespace()
                    let start = scanner.index
                    try scanner.value()
                    members.append(Member(name: name, value: (start + range.lowerBound)..<(scanner.index + range.lowerBound)))
                    scanner.skipWhitespace()
                    if scanner.peek == UInt8(ascii: ",") { scanner.index += 1; continue }
                    try scanner.expect(UInt8(ascii: "}"), "',' or '}'")
                    return members
                }
            } catch {
                return nil
            }
        }
    }

    /// The string value at `range` (quotes included), unescaped; nil when it is no string.
    public static func string(in bytes: [UInt8], at range: Range<Int>) -> String? {
        guard range.lowerBound >= 0, range.upperBound <= bytes.count else { return nil }
        return bytes.withUnsafeBufferPointer { whole -> String? in
            var scanner = Scanner(UnsafeBufferPointer(rebasing: whole[range]), lenient: true)
            guard let text = try? scanner.name(), scanner.index == range.count else { return nil }
            return text
        }
    }
}

extension StrictJSON {
    /// A recursive-descent reader without recursion: containers open and close
    /// on `stack`, so the depth a message can reach costs memory, not stack.
    struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        /// Repeated names and trailing commas pass (for `members`).
        let lenient: Bool
        var index = 0

        /// An open object or array: the names seen so far (objects), the member
        /// or element being read (for paths).
        private struct Container {
            var isObject: Bool
            var names: Set<String> = []
            var member = ""
            var element = 0
        }
        private var stack: [Container] = []

        init(_ bytes: UnsafeBufferPointer<UInt8>, lenient: Bool) {
            self.bytes = bytes
            self.lenient = lenient
        }

        var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

        var path: String {
            var text = ""
            for container in stack {
                if container.isObject {
                    if !container.member.isEmpty { text += text.isEmpty ? container.member : ".\(container.member)" }
                } else {
                    text += "[\(container.element)]"
                }
            }
            return text
        }

        func problem(_ detail: String, kind: Problem.Kind = .syntax, at offset: Int? = nil) -> Problem {
            Problem(kind: kind, offset: offset ?? index, path: path, detail: detail)
        }

        mutating func skipByteOrderMark() {
            if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { index = 3 }
        }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func expect(_ byte: UInt8, _ what: String) throws(Problem) {
            guard peek == byte else { throw unexpected(expecting: what) }
            index += 1
        }

        func unexpected(expecting what: String) -> Problem {
            guard let byte = peek else { return problem("the text ends where \(what) was expected") }
            let shown = (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16, uppercase: true))"
            return problem("\(shown) where \(what) was expected")
        }

        /// Reads one value, whatever it holds.
        mutating func value() throws(Problem) {
            let floor = stack.count
            while true {
                // A value starts here.
                skipWhitespace()
                guard let byte = peek else { throw unexpected(expecting: "a value") }
                switch byte {
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    guard stack.count < StrictJSON.maxDepth else {
                        throw problem("objects and arrays nested deeper than \(StrictJSON.maxDepth)", kind: .tooDeep)
                    }
                    index += 1
                    let isObject = byte == UInt8(ascii: "{")
                    stack.append(Container(isObject: isObject))
                    skipWhitespace()
                    if peek == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                        index += 1
                        stack.removeLast()
                    } else {
                        if isObject { try memberName() }
                        continue
                    }
                case UInt8(ascii: "\""): _ = try string(keeping: false)
                case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
                case UInt8(ascii: "t"): try literal("true")
                case UInt8(ascii: "f"): try literal("false")
                case UInt8(ascii: "n"): try literal("null")
                default: throw unexpected(expecting: "a value")
                }
                // A value ended: close containers until one has more to read.
                while true {
                    guard stack.count > floor else { return }
                    skipWhitespace()
                    let isObject = stack[stack.count - 1].isObject
                    if isObject { stack[stack.count - 1].member = "" }  // between members: the path is the object's
                    let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
                    if peek == UInt8(ascii: ",") {
                        let comma = index
                        index += 1
                        skipWhitespace()
                        if peek == close {
                            guard lenient else { throw problem("a comma before '\(Character(Unicode.Scalar(close)))'", at: comma) }
                            index += 1
                            stack.removeLast()
                            continue
                        }
                        if isObject { try memberName() } else { stack[stack.count - 1].element += 1 }
                        break
                    }
                    try expect(close, isObject ? "',' or '}'" : "',' or ']'")
                    stack.removeLast()
                }
            }
        }

        /// Reads `"name":` in the innermost object and records the name.
        private mutating func memberName() throws(Problem) {
            let start = index
            let text = try name()
            if !lenient, stack[stack.count - 1].names.contains(text) {
                stack[stack.count - 1].member = text
                throw problem("a repeated member name", kind: .duplicateName, at: start)
            }
            if !lenient { stack[stack.count - 1].names.insert(text) }
            stack[stack.count - 1].member = text
            skipWhitespace()
            try expect(UInt8(ascii: ":"), "':'")
        }

        /// A string, unescaped.
        mutating func name() throws(Problem) -> String {
            guard peek == UInt8(ascii: "\"") else { throw unexpected(expecting: "a member name (a string)") }
            return String(decoding: try string(keeping: true), as: UTF8.self)
        }

        /// Reads a string; `keeping`, returns its unescaped UTF-8 (else nothing).
        private mutating func string(keeping: Bool) throws(Problem) -> [UInt8] {
            var text: [UInt8] = []
            index += 1  // the opening quote
            while true {
                guard let byte = peek else { throw problem("the text ends inside a string") }
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    return text
                case UInt8(ascii: "\\"):
                    let scalar = try escape()
                    if keeping { text.append(contentsOf: String(Character(scalar)).utf8) }
                case 0x00..<0x20:
                    throw problem("control character 0x\(String(byte, radix: 16, uppercase: true)) inside a string (it must be escaped)")
                case 0x20..<0x80:
                    if keeping { text.append(byte) }
                    index += 1
                default:
                    let start = index
                    try utf8Sequence()
                    if keeping { text.append(contentsOf: bytes[start..<index]) }
                }
            }
        }

        /// `\x` or `\uXXXX` (a surrogate pair as two), as the scalar it stands for.
        private mutating func escape() throws(Problem) -> Unicode.Scalar {
            let start = index
            index += 1
            guard let byte = peek else { throw problem("the text ends inside an escape") }
            index += 1
            switch byte {
            case UInt8(ascii: "\""): return "\""
            case UInt8(ascii: "\\"): return "\\"
            case UInt8(ascii: "/"): return "/"
            case UInt8(ascii: "b"): return "\u{08}"
            case UInt8(ascii: "f"): return "\u{0C}"
            case UInt8(ascii: "n"): return "\n"
            case UInt8(ascii: "r"): return "\r"
            case UInt8(ascii: "t"): return "\t"
            case UInt8(ascii: "u"):
                let unit = try hex4()
                switch unit {
                case 0xD800...0xDBFF:
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw problem("a lone surrogate escape", at: start)
                    }
                    index += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw problem("a lone surrogate escape", at: start) }
                    return Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))!
                case 0xDC00...0xDFFF:
                    throw problem("a lone surrogate escape", at: start)
                default:
                    return Unicode.Scalar(unit)!
                }
            default:
                throw problem("an unknown escape", at: start)
            }
        }

        private mutating func hex4() throws(Problem) -> UInt32 {
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let byte = peek else { throw problem("the text ends inside a \\u escape") }
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw problem("a \\u escape needs four hex digits")
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        /// One well-formed UTF-8 sequence of two to four bytes (RFC 3629: no
        /// overlong forms, no surrogates, nothing past U+10FFFF).
        private mutating func utf8Sequence() throws(Problem) {
            let lead = bytes[index]
            let count: Int
            var second: ClosedRange<UInt8> = 0x80...0xBF
            switch lead {
            case 0xC2...0xDF: count = 2
            case 0xE0: count = 3; second = 0xA0...0xBF
            case 0xE1...0xEC, 0xEE...0xEF: count = 3
            case 0xED: count = 3; second = 0x80...0x9F
            case 0xF0: count = 4; second = 0x90...0xBF
            case 0xF1...0xF3: count = 4
            case 0xF4: count = 4; second = 0x80...0x8F
            default: throw problem("invalid UTF-8")
            }
            guard index + count <= bytes.count, second.contains(bytes[index + 1]) else { throw problem("invalid UTF-8") }
            for offset in 2..<max(2, count) where !(0x80...0xBF).contains(bytes[index + offset]) {
                throw problem("invalid UTF-8")
            }
            index += count
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
        private mutating func number() throws(Problem) {
            let start = index
            func digits(_ scanner: inout Scanner) -> Int {
                var count = 0
                while let byte = scanner.peek, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { scanner.index += 1; count += 1 }
                return count
            }
            if peek == UInt8(ascii: "-") { index += 1 }
            if peek == UInt8(ascii: "0") {
                index += 1
                if let byte = peek, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                    throw problem("a number with a leading zero", at: start)
                }
            } else if digits(&self) == 0 {
                throw problem("a malformed number", at: start)
            }
            if peek == UInt8(ascii: ".") {
                index += 1
                guard digits(&self) > 0 else { throw problem("a malformed number", at: start) }
            }
            if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
                index += 1
                if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
                guard digits(&self) > 0 else { throw problem("a malformed number", at: start) }
            }
        }

        private mutating func literal(_ word: String) throws(Problem) {
            let start = index
            let count = word.utf8.count
            guard index + count <= bytes.count, bytes[index..<(index + count)].elementsEqual(word.utf8) else {
                throw problem("not a JSON value", at: start)
            }
            index += count
        }
    }
}

/// Why a JSON text is refused (`StrictJSON.check`).
public struct JSONTextError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// Not JSON text (RFC 8259's grammar, UTF-8, no lone surrogate).
        case syntax
        /// A member name repeated in one object.
        case duplicateName
        /// Objects and arrays nested deeper than `StrictJSON.maxDepth`.
        case tooDeep
    }

    public var kind: Kind
    /// Where it was found: the offset of the offending byte in the text.
    public var offset: Int
    /// The member whose value holds it (`options.partSize`, `Records[0].s3`); empty at the top.
    public var path: String
    /// What is wrong, in words.
    public var detail: String

    /// Why `what` is refused, in one phrase.
    public func refusing(_ what: String) -> String {
        kind == .duplicateName ? "\(what): \(self)" : "\(what) is not valid JSON: \(self)"
    }

    public var description: String {
        let path = TerminalText.visible(TextClip.clipped(self.path, toUTF8: 200))
        switch kind {
        case .duplicateName: return "member '\(path)' appears more than once in its object (at byte \(offset))"
        case .syntax, .tooDeep: return "\(detail) at byte \(offset)" + (path.isEmpty ? "" : " (in '\(path)')")
        }
    }
}
