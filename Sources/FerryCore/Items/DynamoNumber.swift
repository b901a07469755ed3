/// DynamoDB's numbers: at most 38 significant digits, magnitude from 1E-130
/// to below 1E+126 (or zero), and no digit below 1E-165 (boto3's limit).
/// Kept as decimal text, never as a binary float, and written in one form per
/// value, so that equal numbers are equal keys (`3`, `3.0`, `3e0` and `0.3E1`
/// are one item, as they are in DynamoDB), a stream record says what was
/// written, not a rounding of it, and numbers order exactly (`orderKey`).
public enum DynamoNumber {
    public static let maxSignificantDigits = 38
    /// Where the decimal point may sit: the value is 0.d₁d₂… × 10^point.
    static let points = -129...126
    /// The place of the lowest digit a number may have.
    static let lowestDigit = -165

    /// A decimal number as sign, significant digits (ASCII, no leading or
    /// trailing zero; none for zero) and the place of the decimal point.
    struct Parsed {
        var negative: Bool
        var digits: [UInt8]
        var point: Int
    }

    /// `[+-] digits [. digits] [(e|E) [+-] digits]`, at least one digit; nil otherwise.
    static func parse(_ text: some Collection<UInt8>) -> Parsed? {
        var bytes = text.makeIterator()
        var next = bytes.next()
        var negative = false
        if next == UInt8(ascii: "-") { negative = true; next = bytes.next() } else if next == UInt8(ascii: "+") { next = bytes.next() }
        var digits: [UInt8] = []
        var point = 0
        var sawDigit = false
        func isDigit(_ b: UInt8?) -> Bool { b.map { $0 >= 0x30 && $0 <= 0x39 } ?? false }
        while isDigit(next) {
            sawDigit = true
            if !(digits.isEmpty && next == 0x30) { digits.append(next!); point += 1 }  // leading zeros say nothing
            next = bytes.next()
        }
        if next == UInt8(ascii: ".") {
            next = bytes.next()
            while isDigit(next) {
                sawDigit = true
                if digits.isEmpty && next == 0x30 { point -= 1 } else { digits.append(next!) }
                next = bytes.next()
            }
        }
        var exponent = 0
        if next == UInt8(ascii: "e") || next == UInt8(ascii: "E") {
            next = bytes.next()
            var exponentNegative = false
            if next == UInt8(ascii: "-") { exponentNegative = true; next = bytes.next() } else if next == UInt8(ascii: "+") { next = bytes.next() }
            guard isDigit(next) else { return nil }
            while isDigit(next) {
                // Past any point a number can have, more digits change nothing but the refusal.
                if exponent < 100_000_000 { exponent = exponent * 10 + Int(next! - 0x30) }
                next = bytes.next()
            }
            if exponentNegative { exponent = -exponent }
        }
        guard sawDigit, next == nil else { return nil }
        while digits.last == 0x30 { digits.removeLast() }
        return digits.isEmpty ? Parsed(negative: false, digits: [], point: 0) : Parsed(negative: negative, digits: digits, point: point + exponent)
    }

    /// The canonical text of a JSON number (or DynamoDB `N` string): plain
    /// decimal notation without leading or trailing zeros, `0` for any zero;
    /// an integer of more than 38 digits as `d.dddE+n` (written out, its zeros
    /// would count as digits). Throws `InvalidRequest`, naming `field`, for
    /// text that is not a number and for a number DynamoDB would refuse (it
    /// refuses them too, rather than round them).
    public static func canonical(_ text: some Collection<UInt8>, field: String) throws(FerryError) -> String {
        guard let number = parse(text) else { throw FerryError(.invalidRequest, "'\(field)' is not a decimal number") }
        let (digits, point) = (number.digits, number.point)
        if digits.isEmpty { return "0" }
        guard digits.count <= maxSignificantDigits else {
            throw FerryError(.invalidRequest, "'\(field)' has \(digits.count) significant digits; DynamoDB keeps at most \(maxSignificantDigits)")
        }
        guard points.contains(point) else {
            throw FerryError(.invalidRequest, "'\(field)' is out of DynamoDB's number range (magnitude 1E-130 to 9.99…E+125)")
        }
        // boto3 reads numbers with 38 digits down to 1E-128, and fewer below it: a
        // digit under 1E-165 would reach a stream handler rounded, or as an error.
        guard point - digits.count >= lowestDigit else {
            throw FerryError(.invalidRequest, "'\(field)' has a digit below 1E\(lowestDigit), which DynamoDB's SDKs (boto3) cannot read exactly")
        }
        var out: [UInt8] = number.negative ? [UInt8(ascii: "-")] : []
        if point <= 0 {
            out += Array("0.".utf8) + Array(repeating: 0x30, count: -point) + digits
        } else if point > maxSignificantDigits {
            // Written out, the zeros would be digits too: boto3 reads more than 38 as an error.
            out.append(digits[0])
            if digits.count > 1 { out.append(UInt8(ascii: ".")); out += digits[1...] }
            out += Array("E+\(point - 1)".utf8)
        } else if point >= digits.count {
            out += digits + Array(repeating: 0x30, count: point - digits.count)
        } else {
            out += digits[..<point]
            out.append(UInt8(ascii: "."))
            out += digits[point...]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Text whose byte order is the numbers' order, exactly (a Double has 15–17
    /// digits: 19-digit sort keys such as nanosecond times compared equal), for
    /// any decimal text `parse` reads with its point within ±5000; nil otherwise.
    /// Zero is `1`; a positive number `2`, its point (offset, four digits) and
    /// its digits; a negative one `0`, the same with the point and the digits
    /// complemented and `~` after them (so a longer magnitude sorts first).
    public static func orderKey(_ text: String) -> String? {
        guard let number = parse(text.utf8) else { return nil }
        if number.digits.isEmpty { return "1" }
        let place = number.point + 5000
        guard (0...9999).contains(place) else { return nil }
        func four(_ n: Int) -> String { let s = String(n); return String(repeating: "0", count: 4 - s.count) + s }
        guard number.negative else { return "2" + four(place) + String(decoding: number.digits, as: UTF8.self) }
        return "0" + four(9999 - place) + String(decoding: number.digits.map { 0x39 - $0 + 0x30 }, as: UTF8.self) + "~"
    }
}
