import FerryCore
import FerryStorage
import Foundation

/// HTTP dates (`Last-Modified`), RFC 9110 §5.6.7: the IMF-fixdate servers
/// send (`Sun, 06 Nov 1994 08:49:37 GMT`) and the two obsolete forms a
/// recipient must still read (`Sunday, 06-Nov-94 08:49:37 GMT`,
/// `Sun Nov  6 08:49:37 1994`). Read byte by byte: a `DateFormatter` made per
/// response cost about 110 µs (ICU sets up a formatter each time), once per
/// GET and HEAD. Nil for anything else, and for dates that do not exist.
enum HTTPDate {
    static func parse(_ text: String) -> Date? {
        var reader = Reader(bytes: Array(text.utf8))
        guard let weekday = reader.letters() else { return nil }
        let short = Self.weekdays.contains(weekday)
        guard short || Self.weekdayNames.contains(weekday) else { return nil }
        let f: (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int)
        if reader.skip(", ") {
            if short {
                // IMF-fixdate: "06 Nov 1994 08:49:37 GMT".
                guard let day = reader.digits(2), reader.skip(" "), let month = reader.month(), reader.skip(" "),
                      let year = reader.digits(4), reader.skip(" "), let time = reader.time(), reader.skip(" "), reader.zone() else { return nil }
                f = (year, month, day, time.0, time.1, time.2)
            } else {
                // RFC 850: "06-Nov-94 08:49:37 GMT"; a two-digit year more than 50 years ahead is of the century before.
                guard let day = reader.digits(2), reader.skip("-"), let month = reader.month(), reader.skip("-"),
                      let twoDigits = reader.digits(2), reader.skip(" "), let time = reader.time(), reader.skip(" "), reader.zone() else { return nil }
                let thisYear = Self.currentYear
                var year = thisYear / 100 * 100 + twoDigits
                if year > thisYear + 50 { year -= 100 }
                f = (year, month, day, time.0, time.1, time.2)
            }
        } else if short, reader.skip(" ") {
            // asctime: "Nov  6 08:49:37 1994" (the day padded with a space).
            guard let month = reader.month(), reader.skip(" ") else { return nil }
            _ = reader.skip(" ")
            guard let day = reader.digits(1...2), reader.skip(" "), let time = reader.time(), reader.skip(" "),
                  let year = reader.digits(4) else { return nil }
            f = (year, month, day, time.0, time.1, time.2)
        } else {
            return nil
        }
        guard reader.atEnd, f.day >= 1, f.day <= Timestamp.daysIn(month: f.month, year: f.year) else { return nil }
        let days = Timestamp.daysSinceEpoch(year: f.year, month: f.month, day: f.day)
        return Date(timeIntervalSince1970: Double(days * 86_400 + f.hour * 3600 + f.minute * 60 + f.second))
    }

    private static let weekdays = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    private static let weekdayNames = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"].map { Array($0.utf8) }
    private static var currentYear: Int {
        var t = time(nil), parts = tm()
        gmtime_r(&t, &parts)
        return Int(parts.tm_year) + 1900
    }

    private struct Reader {
        let bytes: [UInt8]
        var at = 0

        var atEnd: Bool { at == bytes.count }

        mutating func skip(_ literal: StaticString) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard at + count <= bytes.count else { return false }
            for i in 0..<count where bytes[at + i] != literal.utf8Start[i] { return false }
            at += count
            return true
        }

        mutating func letters() -> String? {
            let start = at
            while at < bytes.count, (bytes[at] | 0x20) >= UInt8(ascii: "a"), (bytes[at] | 0x20) <= UInt8(ascii: "z") { at += 1 }
            return at > start ? String(decoding: bytes[start..<at], as: UTF8.self) : nil
        }

        mutating func digits(_ count: Int) -> Int? { digits(count...count) }

        mutating func digits(_ counts: ClosedRange<Int>) -> Int? {
            var value = 0, taken = 0
            while taken < counts.upperBound, at < bytes.count, bytes[at] >= UInt8(ascii: "0"), bytes[at] <= UInt8(ascii: "9") {
                value = value * 10 + Int(bytes[at] - UInt8(ascii: "0"))
                at += 1
                taken += 1
            }
            return counts.contains(taken) ? value : nil
        }

        mutating func month() -> Int? {
            guard at + 3 <= bytes.count, let index = HTTPDate.months.firstIndex(where: { $0[...] == bytes[at..<(at + 3)] }) else { return nil }
            at += 3
            return index + 1
        }

        /// `HH:MM:SS`, each in range (no leap second: Foundation's parser had none either).
        mutating func time() -> (Int, Int, Int)? {
            guard let hour = digits(2), skip(":"), let minute = digits(2), skip(":"), let second = digits(2),
                  hour < 24, minute < 60, second < 60 else { return nil }
            return (hour, minute, second)
        }

        /// HTTP dates are in GMT; some servers write UTC.
        mutating func zone() -> Bool { skip("GMT") || skip("UTC") }
    }
}
