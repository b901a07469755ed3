import Foundation

/// Time formats of the contracts.
public enum Timestamp {
    /// `2026-11-21T05:00:00.123Z`: ISO-8601, milliseconds, UTC (S3 events, statuses).
    /// Written digit by digit: every status and record carries one, and
    /// `String(format:)` made this 2 % of a worker's CPU (S7 profile).
    public static func iso8601(_ date: Date) -> String {
        // Total: a date from elsewhere (a stored index, a store's listing) may be
        // infinite, NaN or beyond what time_t and gmtime can hold, and must not trap.
        let raw = date.timeIntervalSince1970
        let seconds = raw.isNaN ? 0 : min(max(raw, -Self.writableSeconds), Self.writableSeconds)
        var t = time_t(seconds.rounded(.down))
        // Milliseconds, cut (not rounded) as `%03d` of the fraction would, with
        // a grace of a few units in the last place (at least a microsecond, at
        // most a tenth of a millisecond, which far-off dates' ulps exceed): a
        // time read from text (`.123`) comes back as `.12299999…` after the
        // Double arithmetic of parsing, and must be written as it was read.
        let grace = min(1e-4, max(1e-6, 4 * seconds.magnitude.ulp))
        var ms = max(0, Int(((seconds - Double(t) + grace) * 1000).rounded(.down)))
        if ms > 999 { t += 1; ms = 0 }
        var parts = tm()
        gmtime_r(&t, &parts)
        var out = [UInt8]()
        out.reserveCapacity(24)
        func put(_ number: Int, width: Int) {
            if number < 0 { out.append(UInt8(ascii: "-")) }
            let value = number.magnitude
            var divisor: UInt = 1
            // As %0Nd: the sign counts toward the width.
            for _ in 1..<(number < 0 ? width - 1 : width) { divisor *= 10 }
            // A year past 9999 keeps all its digits, as %04d does.
            while value / divisor >= 10 { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                out.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        put(Int(parts.tm_year) + 1900, width: 4); out.append(UInt8(ascii: "-"))
        put(Int(parts.tm_mon) + 1, width: 2); out.append(UInt8(ascii: "-"))
        put(Int(parts.tm_mday), width: 2); out.append(UInt8(ascii: "T"))
        put(Int(parts.tm_hour), width: 2); out.append(UInt8(ascii: ":"))
        put(Int(parts.tm_min), width: 2); out.append(UInt8(ascii: ":"))
        put(Int(parts.tm_sec), width: 2); out.append(UInt8(ascii: "."))
        put(ms, width: 3); out.append(UInt8(ascii: "Z"))
        return String(decoding: out, as: UTF8.self)
    }
}

extension Timestamp {
    /// The most seconds from 1970 either way `iso8601` writes as they are (some
    /// 31 million years); beyond, it writes this bound.
    static let writableSeconds: Double = 1e15

    /// Parses `2026-11-21T05:00:00.123Z` (fractional seconds optional); nil when
    /// it is not that, or names a day the month does not have.
    public static func parse(_ text: String) -> Date? {
        let b = Array(text.utf8)
        func number(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= b.count else { return nil }
            var n = 0
            for c in b[from..<(from + count)] {
                guard c >= 48 && c <= 57 else { return nil }
                n = n * 10 + Int(c - 48)
            }
            return n
        }
        guard b.count >= 20, b[4] == 45, b[7] == 45, b[10] == 84, b[13] == 58, b[16] == 58, b.last == 90,
              let year = number(0, 4), let month = number(5, 2), let day = number(8, 2),
              let hour = number(11, 2), let minute = number(14, 2), let second = number(17, 2),
              (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour < 24, minute < 60, second < 61 else { return nil }
        var fraction = 0.0
        if b.count > 20 {
            // Digits past the ninth (nanoseconds) are checked but not used: they could overflow an Int.
            let count = b.count - 21
            guard b[19] == 46, count > 0, b[20..<(b.count - 1)].allSatisfy({ $0 >= 48 && $0 <= 57 }),
                  let digits = number(20, min(count, 9)) else { return nil }
            fraction = Double(digits) / pow(10, Double(min(count, 9)))
        }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: Double(days * 86_400 + hour * 3600 + minute * 60 + second) + fraction)
    }

    /// A time `parse` reads, as `iso8601` writes it: its fraction cut (not
    /// rounded) to milliseconds as text, so that no Double rounds a microsecond
    /// count across a millisecond. Nil when `parse` refuses it, and for a leap
    /// second (`:60`), which `iso8601` would write as the next minute.
    public static func cutToMilliseconds(_ text: String) -> String? {
        guard parse(text) != nil else { return nil }
        let bytes = Array(text.utf8)
        guard !(bytes[17] == UInt8(ascii: "6") && bytes[18] == UInt8(ascii: "0")) else { return nil }
        // `YYYY-MM-DDTHH:MM:SS`, then the first three digits after the dot (zeros for those missing), then `Z`.
        let digits = bytes.count > 20 ? bytes[20..<(bytes.count - 1)].prefix(3) : []
        let fraction = Array(digits) + Array(repeating: UInt8(ascii: "0"), count: 3 - digits.count)
        return String(decoding: bytes[0..<19] + [UInt8(ascii: ".")] + fraction + [UInt8(ascii: "Z")], as: UTF8.self)
    }

    /// Any ISO 8601 internet date-time (an offset instead of `Z`, fractions or
    /// none): the form stores write is read by `parse`, others by Foundation's
    /// formatter, made only then (making one costs about 0.1 ms).
    public static func parseInternetDateTime(_ text: String) -> Date? {
        if let date = parse(text) { return date }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return fractional.date(from: text) ?? ISO8601DateFormatter().date(from: text)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
    /// days_from_civil); `month` 1...12, `day` as given (not checked against the month).
    public static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// Days in `month` (1...12) of `year`, Gregorian leap years.
    public static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }
}
