import Foundation

/// Time formats of the contracts.
public enum Timestamp {
    /// `2026-11-21T05:00:00.123Z`: ISO-8601, milliseconds, UTC (S3 events, statuses).
    /// Written digit by digit: every status and record carries one, and
    /// `String(format:)` made this 2 % of a worker's CPU (S7 profile).
    public static func iso8601(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970.rounded(.down))
        let ms = min(999, max(0, Int((date.timeIntervalSince1970 - Double(t)) * 1000)))
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
    /// Parses `2026-11-21T05:00:00.123Z` (fractional seconds optional); nil when it is not that.
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
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var fraction = 0.0
        if b.count > 20 {
            // Digits past the ninth (nanoseconds) are checked but not used: they could overflow an Int.
            let count = b.count - 21
            guard b[19] == 46, count > 0, b[20..<(b.count - 1)].allSatisfy({ $0 >= 48 && $0 <= 57 }),
                  let digits = number(20, min(count, 9)) else { return nil }
            fraction = Double(digits) / pow(10, Double(min(count, 9)))
        }
        // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return Date(timeIntervalSince1970: Double(days * 86_400 + hour * 3600 + minute * 60 + second) + fraction)
    }
}
