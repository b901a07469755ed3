/// JSON text as Foundation's `JSONEncoder` (with `.withoutEscapingSlashes`)
/// writes it, for Ferry's one-pass writers: `StreamingJSONEncoder` and the
/// stream record's own writer.
enum JSONText {
    /// `value` quoted, with `"`, `\` and control characters escaped.
    static func append(string value: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\")); bytes.append(byte)
            case UInt8(ascii: "\n"): bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "n"))
            case UInt8(ascii: "\r"): bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "r"))
            case UInt8(ascii: "\t"): bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "t"))
            case 0..<0x20:
                bytes.append(contentsOf: "\\u00".utf8)
                bytes.append(Digits.lower[Int(byte >> 4)])
                bytes.append(Digits.lower[Int(byte & 0x0F)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// The shortest form that reads back, without a trailing `.0`; nil for
    /// infinities and NaN, which JSON cannot hold.
    static func number<F: BinaryFloatingPoint & LosslessStringConvertible>(_ value: F) -> String? {
        guard value.isFinite else { return nil }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return text
    }
}
