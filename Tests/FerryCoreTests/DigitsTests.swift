import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// The digit writers print what `String(format:)` prints, for any value and width.
@Suite struct DigitsTests {
    @Test func sameAsStringFormat() {
        var rng = SeededGenerator(seed: 0xD161)
        let edges: [Int64] = [0, 1, -1, 9, 10, 99_999, Int64.max, Int64.min + 1, Int64.min]
        for n in 0..<5_000 {
            let value = n < edges.count ? edges[n] : Int64(bitPattern: rng.next()) >> Int64.random(in: 0...63, using: &rng)
            let width = Int.random(in: 0...24, using: &rng)
            #expect(Digits.decimal(value, width: width) == String(format: "%0\(width)lld", value), "\(value) width \(width)")
            let unsigned = UInt64(bitPattern: value)
            #expect(Digits.upperHex(unsigned, width: width) == String(format: "%0\(width)llX", unsigned), "\(unsigned) width \(width)")
        }
        let bytes = (0..<300).map { _ in UInt8.random(in: 0...255, using: &rng) }
        #expect(bytes.hexString == bytes.map { String(format: "%02x", $0) }.joined())
        #expect([UInt8]().hexString == "")
    }
}
