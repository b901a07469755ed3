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
        let edges: [Double] = [0, 0.999, 59.9995, 946_684_799.999, 253_402_300_799.999, 253_402_300_800, -62_135_596_800, -62_198_755_200]
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
}
