/// Fixed-width numbers and hex, written digit by digit. `String(format:)`
/// goes through Foundation's formatter: in the pipeline benchmark it was
/// 1.8 % of the worker's CPU, for sequence numbers and event ids.
public enum Digits {
    static let lower = Array("0123456789abcdef".utf8), upper = Array("0123456789ABCDEF".utf8)

    /// `value` in base 10, zero-padded to `width` (as `%0<width>lld`; a wider
    /// value is written whole, a negative one with its `-` first).
    public static func decimal(_ value: Int64, width: Int) -> String {
        digits(value.magnitude, radix: 10, width: width - (value < 0 ? 1 : 0), prefix: value < 0 ? "-" : "", table: lower)
    }

    /// `value` in uppercase hex, zero-padded to `width` (as `%0<width>llX`).
    public static func upperHex(_ value: UInt64, width: Int) -> String {
        digits(value, radix: 16, width: width, prefix: "", table: upper)
    }

    /// The value of one hex digit (either case), or nil for any other byte.
    public static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func digits(_ value: UInt64, radix: UInt64, width: Int, prefix: String, table: [UInt8]) -> String {
        var reversed = [UInt8]()
        reversed.reserveCapacity(max(width, 20))
        var v = value
        repeat {
            reversed.append(table[Int(v % radix)])
            v /= radix
        } while v > 0
        while reversed.count < width { reversed.append(UInt8(ascii: "0")) }
        return prefix + String(decoding: reversed.reversed(), as: UTF8.self)
    }
}

extension Collection<UInt8> {
    /// Lowercase hex, two digits a byte, as SigV4 and ETags use.
    public var hexString: String {
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for b in self {
            out.append(Digits.lower[Int(b >> 4)])
            out.append(Digits.lower[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
