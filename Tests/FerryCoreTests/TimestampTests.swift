import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// `Timestamp.iso8601` writes what `String(format:)` wrote before it, and `parse` reads it back.
@Suite struct TimestampTests {
    func formatted(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970.rounded(.down))
        let ms = Int((date.timeIntervalSince1970 - Double(t)) * 1000)
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                      Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
                      Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), min(ms, 999))
    }

    @Test func sameAsStringFormatAndReadBack() {
        var rng = SeededGenerator(seed: 0x7153)
        // From before the year 1 to past 9999, with every millisecond value.
        // (Fractions of whole milliseconds are checked below: `String(format:)` cut
        // 0.999, stored as 0.99899…, to 998.)
        let edges: [Double] = [0, 59.9995, 253_402_300_800, -62_135_596_800, -62_198_755_200]
        for n in 0..<5_000 {
            let seconds = n < edges.count ? edges[n] : Double.random(in: -70_000_000_000...400_000_000_000, using: &rng).rounded(.down)
                + Double(Int.random(in: 0...999, using: &rng)) / 1000 + 0.0002
            let date = Date(timeIntervalSince1970: seconds)
            let text = Timestamp.iso8601(date)
            #expect(text == formatted(date), "\(seconds)")
            if (0...253_402_300_799).contains(seconds), let back = Timestamp.parse(text) {
                #expect(abs(back.timeIntervalSince1970 - seconds) < 0.001, "\(text)")
            } else if (0...253_402_300_799).contains(seconds) {
                Issue.record("\(text) does not parse")
            }
        }
    }

    /// Any date is written, none traps: dates from elsewhere (a stored index, a
    /// listing) may be infinite, NaN or past what time_t holds.
    @Test func everyDateIsWritten() {
        let bound = Timestamp.iso8601(Date(timeIntervalSince1970: 1e15))
        let lowest = Timestamp.iso8601(Date(timeIntervalSince1970: -1e15))
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: .infinity)) == bound)
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: 1e300)) == bound)
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: -.infinity)) == lowest)
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: .nan)) == "1970-01-01T00:00:00.000Z")
        #expect(bound.hasSuffix("T01:46:40.000Z") && lowest.hasSuffix("Z"), "\(bound) \(lowest)")
    }

    /// A time read from text is written back as that text: every millisecond
    /// of generated seconds from 1970 to 9999, read by `parse` and by
    /// Foundation's ISO 8601 formatter (store notifications, listings).
    /// Without the grace in `iso8601`, about half lost a millisecond.
    @Test func textReadIsWrittenBackAsItWas() throws {
        var rng = SeededGenerator(seed: FuzzReplay.seed)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for _ in 0..<200 {
            let second = Int.random(in: 0...253_402_300_799, using: &rng)
            let whole = String(Timestamp.iso8601(Date(timeIntervalSince1970: Double(second))).dropLast(5))
            for ms in 0..<1000 where ms < 20 || ms > 980 || ms % 7 == 0 {
                let text = whole + "." + String(1000 + ms).dropFirst() + "Z"
                #expect(Timestamp.parse(text).map(Timestamp.iso8601) == text)
                if second < 4_102_444_800, ms % 49 == 0 {
                    #expect(formatter.date(from: text).map(Timestamp.iso8601) == text)
                }
            }
        }
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: 0.999)) == "1970-01-01T00:00:00.999Z")
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: 946_684_799.999)) == "1999-12-31T23:59:59.999Z")
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: 946_684_799.9999999)) == "2000-01-01T00:00:00.000Z")
    }
}
