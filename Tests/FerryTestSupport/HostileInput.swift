import Foundation
import PropertyBased

/// Hostile values for every kind of value a request carries, drawn from a
/// seeded generator so a failure reproduces from its seed. The unit property
/// tests draw single values through `Generator`s; the adversarial suite draws
/// whole messages through `HostileRequestGenerator`.
public enum HostileInput {
    /// Pieces hostile keys, identities and paths are made of: dot segments in
    /// every disguise, separators, control and format characters, encodings,
    /// other levels' prefixes, template syntax, long runs.
    public static let pieces: [String] = [
        ".", "..", "", "...", ".hidden", "a.", "a", "b.txt", "alice", "bob", "public", "protected", "private",
        "%2e%2e", "%2E%2e", "%2F", "%00", "%", "%zz", "\\", "..\\..", "~", "+", "&", "=", "?", "#", "*", ";", "'", "\"",
        "<x>", "{identityId}", " ", "\t", "\n", "\r\n", "\u{0}", "\u{7}", "\u{1B}[31m", "\u{7F}", "\u{85}", "\u{9F}",
        "\u{200B}", "\u{202E}", "\u{FEFF}", "\u{FFFE}", "\u{FFFF}", "é", "日本", "𝄞", "ﬁ", "Å", "A\u{30A}",
        String(repeating: "k", count: 300), String(repeating: "é", count: 200),
    ]

    /// A key built from 1…6 pieces joined by `/` (sometimes `//`, or nothing).
    public static func key(_ rng: inout some RandomNumberGenerator) -> String {
        let count = Int.random(in: 1...6, using: &rng)
        var key = ""
        for index in 0..<count {
            if index > 0 || Int.random(in: 0..<8, using: &rng) == 0 {
                key += ["/", "/", "/", "//", ""].randomElement(using: &rng)!
            }
            key += pieces.randomElement(using: &rng)!
        }
        if Int.random(in: 0..<10, using: &rng) == 0 { key += "/" }
        return key
    }

    /// An identity id: sometimes plausible, mostly not; never exactly "alice",
    /// whose objects the suites keep as victims (as herself she may write them).
    public static func identity(_ rng: inout some RandomNumberGenerator) -> String {
        let identity: String
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: identity = ["mallory", "us-east-1:0f3a9c", "eve@example.com", "bob"].randomElement(using: &rng)!
        case 1: identity = key(&rng)
        default: identity = pieces.randomElement(using: &rng)! + pieces.randomElement(using: &rng)!
        }
        return identity == "alice" ? "mallory" : identity
    }

    /// A header or metadata value: plausible, injected, binary or huge.
    public static func headerValue(_ rng: inout some RandomNumberGenerator) -> String {
        switch Int.random(in: 0..<8, using: &rng) {
        case 0: return "plain value"
        case 1: return "x\r\nx-amz-meta-injected: yes"
        case 2: return "x\nX-Injected: 1"
        case 3: return "x\r\n\r\nGET / HTTP/1.1"
        case 4: return " padded "
        case 5: return String(repeating: "v", count: Int.random(in: 2000...9000, using: &rng))
        case 6: return pieces.randomElement(using: &rng)! + "\u{0}" + pieces.randomElement(using: &rng)!
        default: return key(&rng)
        }
    }

    /// JSON number literals at and past every boundary a number can cross.
    public static let numberLiterals: [String] = [
        "0", "-0", "1", "-1", "0.5", "1e21", "-1e21", "1e308", "-1e308", "1e309", "4.9e-324", "1e-400",
        "9223372036854775807", "9223372036854775808", "-9223372036854775809", "18446744073709551616",
        "2147483648", "4294967296", "5242880", "5368709120", "5368709121", "65", "604800", "604801", "3.0",
        "100000000000000000000000000000000000000000000", "0.000000000000000000000001",
    ]

    /// A JSON value of any type, sometimes nested deep.
    public static func jsonValue(_ rng: inout some RandomNumberGenerator, depth: Int = 0) -> String {
        switch Int.random(in: 0..<9, using: &rng) {
        case 0: return numberLiterals.randomElement(using: &rng)!
        case 1: return ["true", "false", "null"].randomElement(using: &rng)!
        case 2: return jsonString(key(&rng))
        case 3: return jsonString(headerValue(&rng))
        case 4 where depth < 3:
            return "[" + (0..<Int.random(in: 0...3, using: &rng)).map { _ in jsonValue(&rng, depth: depth + 1) }.joined(separator: ",") + "]"
        case 5 where depth < 3:
            return "{" + (0..<Int.random(in: 0...3, using: &rng)).map { _ in
                jsonString(pieces.randomElement(using: &rng)!) + ":" + jsonValue(&rng, depth: depth + 1)
            }.joined(separator: ",") + "}"
        case 6: return String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000)
        default: return jsonString(pieces.randomElement(using: &rng)!)
        }
    }

    /// `text` as a JSON string literal (escaped as JSONSerialization would).
    public static func jsonString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// `Generator`s of the values above, for `propertyCheck`.
    public static let keys = Generator<String, Shrink.None<String>> { rng in key(&rng) }
    public static let identities = Generator<String, Shrink.None<String>> { rng in identity(&rng) }
    public static let headerValues = Generator<String, Shrink.None<String>> { rng in headerValue(&rng) }
    public static let jsonValues = Generator<String, Shrink.None<String>> { rng in jsonValue(&rng) }

    /// A seeded generator from one number (the seed printed by a failing run).
    public static func rng(seed: UInt64) -> Xoshiro {
        var state = seed
        func splitmix() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        return Xoshiro(seed: (splitmix(), splitmix(), splitmix(), splitmix()))
    }
}
