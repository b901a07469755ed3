@testable import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// Invariant: a key is in an area, a listing or a trigger's filter exactly
/// when its UTF-8 bytes start (or end) with the prefix's, as S3 compares them;
/// never by Swift's character comparison, which takes `e\u{301}` for `é`, the
/// Kelvin sign for `K`, and `/\u{301}` for something other than `/`.
@Suite struct ByteOrderTests {
    /// Pieces whose characters and bytes disagree: canonical twins, combining
    /// marks that join the character before them (a `/`, a letter).
    static let pieces = ["public/", "protected/", "private/", "Kate", "\u{212A}ate", "K", "\u{212A}", "é", "e\u{301}", "e", "\u{301}",
                         "/", "x", "Å", "A\u{30A}", "\u{212B}", ".jpg", ".jp", "g\u{301}", "alice", "a"]

    static func text(_ rng: inout SeededGenerator) -> String {
        (0..<Int.random(in: 0...5, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
    }

    @Test func prefixesAndSuffixesAreByBytes() {
        let seed = FuzzReplay.seed
        var rng = SeededGenerator(seed: seed)
        var disagreements = 0
        for _ in 0..<5_000 {
            let (text, affix) = (Self.text(&rng), Self.text(&rng))
            let (bytes, affixBytes) = (Array(text.utf8), Array(affix.utf8))
            let prefix = bytes.count >= affixBytes.count && Array(bytes.prefix(affixBytes.count)) == affixBytes
            let suffix = bytes.count >= affixBytes.count && Array(bytes.suffix(affixBytes.count)) == affixBytes
            #expect(text.hasBytePrefix(affix) == prefix, "\(text.debugDescription) / \(affix.debugDescription) (FERRY_FUZZ_SEED=\(seed))")
            #expect(text.hasByteSuffix(affix) == suffix, "\(text.debugDescription) / \(affix.debugDescription) (FERRY_FUZZ_SEED=\(seed))")
            if text.hasPrefix(affix) != prefix || text.hasSuffix(affix) != suffix { disagreements += 1 }
        }
        // The generator does reach the cases Swift's comparison gets wrong.
        #expect(disagreements > 10, "only \(disagreements) texts where characters and bytes disagree")
    }

    /// `area(of:)` against an oracle on bytes: guest when the bytes start with
    /// `public/`; else the owner is the bytes after `protected/` or `private/`
    /// up to the next `/`, when they make a valid identity.
    @Test func aKeysAreaIsDecidedByItsBytes() throws {
        let resolver = try TemplatePrefixResolver()
        let seed = FuzzReplay.seed
        var rng = SeededGenerator(seed: seed)
        for _ in 0..<5_000 {
            let key = Self.text(&rng) + (Bool.random(using: &rng) ? "/x" : "")
            let bytes = Array(key.utf8)
            var expected: ObjectArea?
            if bytes.starts(with: Array("public/".utf8)) {
                expected = ObjectArea(level: .guest, owner: nil)
            } else {
                for (level, head) in [(AccessLevel.protected, "protected/"), (.private, "private/")] where bytes.starts(with: Array(head.utf8)) {
                    let rest = bytes.dropFirst(head.utf8.count)
                    guard let slash = rest.firstIndex(of: UInt8(ascii: "/")) else { break }
                    let owner = String(decoding: rest[..<slash], as: UTF8.self)
                    if !owner.isEmpty, IdentityRule.violation(of: owner, field: "identityId") == nil { expected = ObjectArea(level: level, owner: owner) }
                }
            }
            let got = resolver.area(of: key)
            #expect(got?.level == expected?.level && got?.owner == expected?.owner,
                    "\(key.debugDescription): \(String(describing: got)) (FERRY_FUZZ_SEED=\(seed))")
        }
        // The cases by name: a combining mark after the guest prefix's slash is still the guest area.
        #expect(resolver.area(of: "public/\u{301}x")?.level == .guest)
        #expect(resolver.area(of: "protected/Kate/\u{301}x")?.owner == "Kate")
    }
}
