import FerryCore
import FerryTestSupport
import Testing

/// A region is one segment of the signing scope and part of AWS's host name:
/// generated strings of its alphabet up to 64 pass, and any other character
/// anywhere, or a length of 0 or over 64, is refused.
@Suite struct RegionRuleTests {
    static let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
    static let outside: [Character] = [" ", "/", "?", "#", "@", ":", "%", "\t", "\n", "\u{0}", "\u{7F}", "é", "日", "\u{202E}", "[", "\\"]

    @Test func theAlphabetPassesAndAnythingElseIsRefused() {
        var rng = SeededGenerator(seed: 0x5E61)
        for _ in 0..<2000 {
            let region = String((0..<Int.random(in: 1...64, using: &rng)).map { _ in Self.alphabet.randomElement(using: &rng)! })
            #expect(RegionRule.violation(of: region) == nil, "\(region)")
            var spoiled = region
            spoiled.insert(Self.outside.randomElement(using: &rng)!, at: spoiled.index(spoiled.startIndex, offsetBy: Int.random(in: 0...region.count, using: &rng)))
            #expect(RegionRule.violation(of: spoiled) != nil, "\(spoiled.debugDescription)")
        }
        #expect(RegionRule.violation(of: "") != nil)
        #expect(RegionRule.violation(of: String(repeating: "r", count: 65)) != nil)
        for region in ["us-east-1", "cn-north-1", "us-gov-west-1", "eu-central-003", "auto", "default"] {
            #expect(RegionRule.violation(of: region) == nil)
        }
    }
}
