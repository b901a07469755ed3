/// Reads one top-level string field of a JSON object by scanning bytes: no
/// recursion, no allocation beyond the result, linear in the input. For the
/// paths that must not depend on a full JSON parser (quarantining a message
/// that may crash one, labelling a message before it is decoded).
public enum TopLevelJSONField {
    /// The value of the top-level string field `name` when it is made of
    /// `allowed` bytes only and at most `maxLength` long; nil otherwise (absent,
    /// not a string, escaped, nested only, or the input is not an object).
    public static func string(_ name: String, in bytes: [UInt8], maxLength: Int = 128,
                              allowed: (UInt8) -> Bool = { _ in true }) -> String? {
        let wanted = Array(name.utf8)
        var depth = 0
        var i = 0
        var expectingKey = false
        // Skip leading whitespace; the input must be an object.
        while i < bytes.count, isSpace(bytes[i]) { i += 1 }
        guard i < bytes.count, bytes[i] == UInt8(ascii: "{") else { return nil }
        while i < bytes.count {
            let c = bytes[i]
            switch c {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                expectingKey = c == UInt8(ascii: "{") && depth == 1
                i += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth <= 0 { return nil }
                i += 1
            case UInt8(ascii: ","):
                expectingKey = depth == 1
                i += 1
            case UInt8(ascii: "\""):
                guard let end = stringEnd(bytes, from: i) else { return nil }
                if expectingKey && depth == 1 {
                    let key = bytes[(i + 1)..<end]
                    i = end + 1
                    expectingKey = false
                    guard key.elementsEqual(wanted) else { continue }
                    while i < bytes.count, isSpace(bytes[i]) { i += 1 }
                    guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return nil }
                    i += 1
                    while i < bytes.count, isSpace(bytes[i]) { i += 1 }
                    guard i < bytes.count, bytes[i] == UInt8(ascii: "\""), let valueEnd = stringEnd(bytes, from: i) else { return nil }
                    let value = bytes[(i + 1)..<valueEnd]
                    guard value.count <= maxLength, value.allSatisfy({ allowed($0) && $0 != UInt8(ascii: "\\") }) else { return nil }
                    return String(decoding: value, as: UTF8.self)
                }
                i = end + 1
            default:
                i += 1
            }
        }
        return nil
    }

    /// The index of the quote that closes the string opening at `start`.
    private static func stringEnd(_ bytes: [UInt8], from start: Int) -> Int? {
        var i = start + 1
        while i < bytes.count {
            switch bytes[i] {
            case UInt8(ascii: "\\"): i += 2
            case UInt8(ascii: "\""): return i
            default: i += 1
            }
        }
        return nil
    }

    private static func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D }
}

extension RequestDecoder {
    /// The request id a message carries at its top level, read without
    /// decoding it (see `TopLevelJSONField`); nil when there is no valid one.
    public static func idHint(_ bytes: [UInt8]) -> String? {
        TopLevelJSONField.string("id", in: bytes, maxLength: maxIdLength) { isIdByte($0) }
    }

    static func isIdByte(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
            || c == 0x2E || c == 0x5F || c == 0x3A || c == 0x2D
    }
}
