import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// Keys in S3 events are form-URL-encoded. Checked on seeded random strings:
/// decoding undoes encoding, and the byte-level decoder answers what
/// Foundation's percent decoding (the implementation before it) answers, on
/// malformed input too, except where Foundation put U+FFFD for bytes that are
/// not UTF-8: there the `%` sequences are kept (nothing is lost).
@Suite struct FormURLEncodingTests {
    /// Foundation's answer: `+` to space, then `%XX`, or only the `+` when that fails.
    static func reference(_ s: String) -> String {
        let plusDecoded = s.replacingOccurrences(of: "+", with: " ")
        return plusDecoded.removingPercentEncoding ?? plusDecoded
    }

    static func randomString(_ rng: inout SeededGenerator, from alphabet: [String]) -> String {
        (0..<Int(rng.next() % 12)).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }.joined()
    }

    @Test func decodingUndoesEncoding() {
        var rng = SeededGenerator(seed: 17)
        let alphabet = ["a", "Z", "0", " ", "+", "%", "/", "..", "é", "日", "🚀", "\u{0}", "~", "*", "-", "?", "#"]
        for _ in 0..<5000 {
            let key = Self.randomString(&rng, from: alphabet)
            let encoded = FormURLEncoding.encode(key)
            #expect(FormURLEncoding.isEncoded(encoded), "\(key.debugDescription)")
            #expect(FormURLEncoding.decode(encoded) == key, "\(key.debugDescription) -> \(encoded)")
        }
    }

    @Test func decodingMatchesFoundationOnAnyInput() {
        var rng = SeededGenerator(seed: 18)
        // Heavy in `%`, `+` and hex digits, so malformed and non-UTF-8 sequences come up often.
        let alphabet = ["%", "%", "+", "2", "B", "f", "F", "g", "C3", "A9", "E6", "97", "a", " ", "é", "/"]
        var kept = 0
        for _ in 0..<20000 {
            let s = Self.randomString(&rng, from: alphabet)
            let reference = Self.reference(s)
            if reference.contains("\u{FFFD}") {
                kept += 1
                #expect(FormURLEncoding.decode(s) == s.replacingOccurrences(of: "+", with: " "), "\(s.debugDescription)")
            } else {
                #expect(FormURLEncoding.decode(s) == reference, "\(s.debugDescription)")
            }
        }
        #expect(kept > 0, "the generator should reach bytes that are not UTF-8")
        for s in ["", "plain/key.txt", "%", "%2", "%2B", "a+b", "%zz+%41", "%C3%A9", "%C3", "%FF%41", "100%+sure"] {
            #expect(FormURLEncoding.decode(s) == Self.reference(s), "\(s.debugDescription)")
        }
        #expect(FormURLEncoding.decode("%A9+x") == "%A9 x")
    }
}
