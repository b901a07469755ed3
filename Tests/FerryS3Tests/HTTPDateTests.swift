@testable import FerryLocalStore
@testable import FerryS3
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// `Last-Modified` is read by hand (`HTTPDate`); Foundation's formatter, which
/// read it before, is the reference.
@Suite struct HTTPDateTests {
    static func formatter(_ format: String) -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = format
        return formatter
    }

    static let imf = formatter("EEE, dd MMM yyyy HH:mm:ss 'GMT'")
    /// What Ferry used before: the reference for IMF-fixdates.
    static let reference = formatter("EEE, dd MMM yyyy HH:mm:ss zzz")

    static func currentYear() -> Int { Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "GMT")!, from: Date()).year! }

    /// Every instant from year 1600 to 9999 reads back from each of the three
    /// forms to the same second (before 1582 Foundation's calendar is Julian).
    @Test func generatedDatesReadBackInEveryForm() throws {
        let seed = FuzzReplay.seed
        print("HTTPDateTests seed \(seed)")
        var random = SeededGenerator(seed: seed)
        let rfc850 = Self.formatter("EEEE, dd-MMM-yy HH:mm:ss 'GMT'")
        let asctime = Self.formatter("EEE MMM d HH:mm:ss yyyy")
        let thisYear = Self.currentYear()
        var leapDays = 0
        for index in 0..<3_000 {
            // Some instants on 29 February, the rest anywhere from 1600 to 9999.
            let seconds: Int
            if index % 10 == 0 {
                let year = [2000, 2024, 1600, 2400, 1996].randomElement(using: &random)!
                seconds = Int(Self.imf.date(from: "Tue, 29 Feb \(year) 00:00:00 GMT")!.timeIntervalSince1970) + Int.random(in: 0..<86_400, using: &random)
                leapDays += 1
            } else {
                seconds = Int.random(in: -11_676_096_000...253_402_300_799, using: &random)
            }
            let date = Date(timeIntervalSince1970: Double(seconds))
            let text = Self.imf.string(from: date)
            #expect(HTTPDate.parse(text) == date, "\(text)")
            #expect(Self.reference.date(from: text) == date, "the reference reads \(text) otherwise")
            // asctime pads a one-digit day with a space.
            var spaced = asctime.string(from: date)
            if let range = spaced.range(of: #"^\w{3} \w{3} \d "#, options: .regularExpression) {
                spaced.insert(" ", at: spaced.index(range.upperBound, offsetBy: -2))
            }
            #expect(HTTPDate.parse(spaced) == date, "\(spaced)")
            // Two-digit years stand for the 100 years up to 50 ahead.
            let year = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "GMT")!, from: date).year!
            if year > thisYear - 50, year <= thisYear + 50 {
                let old = rfc850.string(from: date)
                #expect(HTTPDate.parse(old) == date, "\(old)")
            }
        }
        #expect(leapDays == 300)
    }

    /// Dates that do not exist, other zones and broken forms read as nil, not
    /// as some other instant.
    @Test func malformedDatesAreNil() {
        for text in ["", "GMT", "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 6 Nov 1994 08:49:37 GMT",
                     "Sun, 31 Apr 1994 08:49:37 GMT", "Sun, 29 Feb 1900 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
                     "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 06 Nov 1994 08:49:37 GMT ", "Sunday, 06 Nov 1994 08:49:37 GMT",
                     "Sun, 06-Nov-94 08:49:37 GMT", "Sund, 06 Nov 1994 08:49:37 GMT", "Sun, 06 nov 1994 08:49:37 GMT",
                     "Sun Nov 6 08:49:37 94", "Sun Nov  6 08:49:37 1994 GMT", "2026-11-28T06:07:07Z", "Sun, 00 Nov 1994 08:49:37 GMT"] {
            #expect(HTTPDate.parse(text) == nil, "\(text)")
        }
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 UTC") == HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"))
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"))
        // 94 is 1994 until 2094 is at most 50 years ahead.
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == HTTPDate.parse("Sun, 06 Nov \(Self.currentYear() >= 2044 ? 2094 : 1994) 08:49:37 GMT"))
    }

    /// Hostile variants of valid dates (bytes replaced, inserted, removed, the
    /// text cut): never a trap, and any that reads as an IMF-fixdate reads as
    /// Foundation's formatter reads it.
    @Test func hostileVariantsReadAsTheReferenceDoes() {
        var random = SeededGenerator(seed: FuzzReplay.seed)
        let alphabet = Array("0123456789 :,-GMTUCNovFebSunday\u{0}\u{7F}é\r\n".utf8)
        var accepted = 0
        for _ in 0..<5_000 {
            let date = Date(timeIntervalSince1970: Double(Int.random(in: -2_208_988_800...4_102_444_800, using: &random)))
            var bytes = Array(Self.imf.string(from: date).utf8)
            for _ in 0..<Int.random(in: 1...3, using: &random) where !bytes.isEmpty {
                let at = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<4, using: &random) {
                case 0: bytes[at] = alphabet.randomElement(using: &random)!
                case 1: bytes.insert(alphabet.randomElement(using: &random)!, at: at)
                case 2: bytes.remove(at: at)
                default: bytes.removeSubrange(at...)
                }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            guard let parsed = HTTPDate.parse(text) else { continue }
            accepted += 1
            // Foundation's calendar is Julian before 1582.
            if text.count > 5, Array(text.utf8)[3] == UInt8(ascii: ","), parsed.timeIntervalSince1970 >= -11_676_096_000 {
                #expect(Self.reference.date(from: text) == parsed, "\(text.debugDescription)")
            }
        }
        // Some mutations keep a valid date (a digit for another): the comparison ran.
        #expect(accepted >= 20)
    }
}
