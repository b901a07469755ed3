import FerryCore
import FerryTestSupport
import Foundation
import PropertyBased
import Testing

/// StrictJSON against a reader no one here wrote: Python's json module, held
/// to RFC 8259 and unique member names (Tests/python/strict_json.py).
@Suite struct StrictJSONTests {
    @Test func foundationTakesWhatPeersRefuseOrReadDifferently() throws {
        // Why the check exists: Foundation takes a trailing comma, and its two
        // readers pick different values of a repeated name.
        #expect((try? JSONSerialization.jsonObject(with: Data(#"{"a":1,}"#.utf8))) != nil)
        struct A: Decodable { var a: Int }
        let twice = Data(#"{"a":1,"a":2}"#.utf8)
        let first = try JSONDecoder().decode(A.self, from: twice).a
        let last = (try JSONSerialization.jsonObject(with: twice) as? [String: Any])?["a"] as? Int
        #expect(first != last)
        #expect(StrictJSON.check(Array(#"{"a":1,}"#.utf8))?.kind == .syntax)
        #expect(StrictJSON.check(Array(twice))?.kind == .duplicateName)
    }

    @Test(arguments: [
        (#"{"identityId":"a","identit\u0079Id":"b"}"#, "identityId"),            // an escape spells the same name
        (#"{"options":{"partSize":1,"partSize":2}}"#, "options.partSize"),
        (#"{"Records":[{"s3":{},"x":1,"s3":{}}]}"#, "Records[0].s3"),
        ("{\"caf\u{E9}\":1,\"cafe\u{301}\":2}", "caf\u{E9}"),                   // canonically equivalent, as Swift compares
        (#"[{"a":1},{"a":1,"b":{"c":[0,{"d":1,"d":1}]}}]"#, "[1].b.c[1].d"),
    ])
    func repeatedNamesAreFoundWhereverTheyAre(text: String, path: String) throws {
        let problem = try #require(StrictJSON.check(Array(text.utf8)))
        #expect(problem.kind == .duplicateName)
        #expect(problem.path.precomposedStringWithCanonicalMapping == path.precomposedStringWithCanonicalMapping)
        #expect(problem.description.contains("appears more than once"))
    }

    @Test func positionsAndWordsOfSyntaxProblems() throws {
        let comma = try #require(StrictJSON.check(Array(#"{"id":"x","op":"delete",}"#.utf8)))
        #expect(comma.offset == 23 && comma.description == "a comma before '}' at byte 23")
        let control = try #require(StrictJSON.check(Array("{\"k\":\"a\nb\"}".utf8)))
        #expect(control.description == "control character 0xA inside a string (it must be escaped) at byte 7 (in 'k')")
        #expect(StrictJSON.check(Array(#"{"a":1} {"#.utf8))?.detail == "text after the JSON value")
        #expect(StrictJSON.check(Array("\u{FEFF} {\"a\":[1, 2.5e-3, -0, true, null, \"\\ud834\\udd1e\"]} ".utf8)) == nil)
    }

    @Test func depthIsBoundedWithoutRecursion() {
        let deepest = String(repeating: "[", count: StrictJSON.maxDepth) + String(repeating: "]", count: StrictJSON.maxDepth)
        #expect(StrictJSON.check(Array(deepest.utf8)) == nil)
        let over = "[" + deepest + "]"
        #expect(StrictJSON.check(Array(over.utf8))?.kind == .tooDeep)
        // A million brackets cost memory for their containers, not stack: no crash.
        #expect(StrictJSON.check([UInt8](repeating: UInt8(ascii: "["), count: 1_000_000))?.kind == .tooDeep)
        #expect(StrictJSON.members(of: [UInt8](repeating: UInt8(ascii: "{"), count: 1_000_000)) == nil)
    }

    @Test func membersListsEveryOccurrence() throws {
        let text = Array(#" {"auth":"a","x":[1,{"auth":"n"}],"auth" : "b\"c",} "#.utf8)
        let members = try #require(StrictJSON.members(of: text))
        #expect(members.map(\.name) == ["auth", "x", "auth"])
        #expect(members.compactMap { StrictJSON.string(in: text, at: $0.value) } == ["a", "b\"c"])
        #expect(StrictJSON.members(of: Array("[1]".utf8)) == nil)
    }

    /// Generated texts, valid and not, get the same verdict from StrictJSON as
    /// from Python's reader; whatever StrictJSON takes, Foundation reads too.
    @Test func verdictsMatchPythonOnGeneratedTexts() async throws {
        let seed = FuzzReplay.seed, count = FuzzReplay.messages(default: 4000)
        print("StrictJSON cross-check seed \(seed) (FERRY_FUZZ_SEED replays it), \(count) texts")
        var rng = HostileInput.rng(seed: seed)
        var texts: [JSONTextSample] = []
        for _ in 0..<count { texts.append(JSONTextSample.make(&rng)) }
        let script = TestPaths.python.appendingPathComponent("strict_json.py").path
        let input = texts.map { Data($0.bytes).base64EncodedString() }.joined(separator: "\n") + "\n"
        let verdicts = try await runChecked("python3", [script], input: Data(input.utf8)).split(separator: "\n").map(String.init)
        try #require(verdicts.count == texts.count)
        var accepted = 0
        var refusedBy: [String: Int] = [:]
        for (sample, verdict) in zip(texts, verdicts) {
            let problem = StrictJSON.check(sample.bytes)
            #expect((problem == nil) == (verdict == "ok"),
                    "StrictJSON \(problem.map { "refused: \($0)" } ?? "accepted"), Python \(verdict): \(sample)")
            if problem == nil {
                accepted += 1
                #expect((try? JSONSerialization.jsonObject(with: Data(sample.bytes), options: [.fragmentsAllowed])) != nil,
                        "Foundation cannot read what StrictJSON took: \(sample)")
            } else if let problem {
                refusedBy["\(problem.kind)", default: 0] += 1
            }
        }
        print("StrictJSON cross-check: \(accepted) accepted, refused \(refusedBy.sorted { $0.key < $1.key })")
        // Both verdicts must be well represented, or the check proves little.
        #expect(accepted > count / 5 && count - accepted > count / 5)
        #expect(refusedBy["duplicateName", default: 0] > count / 20)
    }
}

/// A JSON text from a seed: values of every kind, strings with escapes and
/// multi-byte characters, names from a small pool (so repeats happen, some
/// only after unescaping or normalisation), and, for most texts, one kind of
/// fault sprinkled over it: trailing or doubled commas, bad numbers and
/// literals, raw control characters, lone surrogates, bad escapes, invalid
/// UTF-8, comments, quotes of the wrong kind, text after the end, truncation.
struct JSONTextSample: CustomStringConvertible {
    var bytes: [UInt8]
    var fault: String

    var description: String {
        "[\(fault)] \(String(decoding: bytes.prefix(400), as: UTF8.self).debugDescription)"
    }

    static let faults = ["none", "none", "trailing comma", "doubled comma", "missing comma", "number", "literal",
                         "raw control", "lone surrogate", "bad escape", "invalid UTF-8", "comment", "quotes",
                         "text after", "truncated", "whitespace"]
    static let names = ["a", "b", "id", "key", "caf\u{E9}", "cafe\u{301}", "identityId", "日本", ""]

    static func make(_ rng: inout some RandomNumberGenerator) -> JSONTextSample {
        var writer = Writer(fault: faults.randomElement(using: &rng)!)
        if Int.random(in: 0..<8, using: &rng) == 0 { writer.out += [0xEF, 0xBB, 0xBF] }
        writer.space(&rng)
        if Int.random(in: 0..<6, using: &rng) == 0 { writer.value(depth: 3, &rng) } else { writer.object(depth: 0, &rng) }
        writer.space(&rng)
        switch writer.fault {
        case "text after": if Bool.random(using: &rng) { writer.out += Array(["x", "{}", ",", "]", "0"].randomElement(using: &rng)!.utf8) }
        case "truncated": if writer.out.count > 1 { writer.out.removeLast(Int.random(in: 1..<writer.out.count, using: &rng)) }
        default: break
        }
        return JSONTextSample(bytes: writer.out, fault: writer.fault)
    }

    struct Writer {
        var fault: String
        var out: [UInt8] = []

        /// Whether the text's fault goes in at this chance to place it.
        func faulty(_ kind: String, _ rng: inout some RandomNumberGenerator) -> Bool {
            fault == kind && Int.random(in: 0..<4, using: &rng) == 0
        }

        mutating func put(_ text: String) { out += Array(text.utf8) }

        mutating func space(_ rng: inout some RandomNumberGenerator) {
            for _ in 0..<[0, 0, 0, 1, 2].randomElement(using: &rng)! { put([" ", "\n", "\t", "\r"].randomElement(using: &rng)!) }
            if faulty("whitespace", &rng) { out += [[0x0C], [0xC2, 0xA0], [0x0B], [0xE3, 0x80, 0x80]].randomElement(using: &rng)! }
            if faulty("comment", &rng) { put(["/* c */", "// c\n", "#c\n"].randomElement(using: &rng)!) }
        }

        mutating func object(depth: Int, _ rng: inout some RandomNumberGenerator) {
            put("{")
            let count = Int.random(in: 0...5, using: &rng)
            // Most objects use a name once (as bytes: canonically equal names may still meet).
            var pool = JSONTextSample.names.shuffled(using: &rng)
            let unique = Int.random(in: 0..<4, using: &rng) != 0
            for index in 0..<count {
                if index > 0 { comma(&rng) }
                space(&rng)
                let name = unique && !pool.isEmpty ? pool.removeLast() : JSONTextSample.names.randomElement(using: &rng)!
                if faulty("quotes", &rng) { put("'\(name)'") } else { string(name, &rng) }
                space(&rng)
                put(":")
                space(&rng)
                value(depth: depth + 1, &rng)
            }
            if count > 0, faulty("trailing comma", &rng) { put(",") }
            space(&rng)
            put("}")
        }

        mutating func array(depth: Int, _ rng: inout some RandomNumberGenerator) {
            put("[")
            let count = Int.random(in: 0...4, using: &rng)
            for index in 0..<count {
                if index > 0 { comma(&rng) }
                space(&rng)
                value(depth: depth + 1, &rng)
            }
            if count > 0, faulty("trailing comma", &rng) { put(",") }
            space(&rng)
            put("]")
        }

        mutating func comma(_ rng: inout some RandomNumberGenerator) {
            if faulty("missing comma", &rng) { put(" "); return }
            put(faulty("doubled comma", &rng) ? ",," : ",")
        }

        mutating func value(depth: Int, _ rng: inout some RandomNumberGenerator) {
            switch Int.random(in: 0..<(depth >= 4 ? 4 : 6), using: &rng) {
            case 0: string(text(&rng), &rng)
            case 1: number(&rng)
            case 2: literal(&rng)
            case 3: string(JSONTextSample.names.randomElement(using: &rng)!, &rng)
            case 4: object(depth: depth, &rng)
            default: array(depth: depth, &rng)
            }
        }

        func text(_ rng: inout some RandomNumberGenerator) -> String {
            let pieces = ["a", "Z", " ", "\"", "\\", "/", "\n", "\u{1}", "\u{1F}", "\u{7F}", "é", "e\u{301}", "日", "𝄞", "\u{FEFF}", "\u{0}"]
            return String((0..<Int.random(in: 0...6, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined())
        }

        /// A string: each character as itself, by a short escape or by `\u`
        /// (pairs beyond the BMP), or the text's fault.
        mutating func string(_ text: String, _ rng: inout some RandomNumberGenerator) {
            put("\"")
            for scalar in text.unicodeScalars {
                let escaped = Int.random(in: 0..<5, using: &rng) == 0
                switch scalar {
                case "\"": put("\\\"")
                case "\\": put("\\\\")
                case "\n" where !escaped: put("\\n")
                case _ where scalar.value < 0x20 || escaped:
                    if scalar.value > 0xFFFF {
                        let v = scalar.value - 0x10000
                        put(String(format: "\\u%04x\\u%04X", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)))
                    } else {
                        put(String(format: Bool.random(using: &rng) ? "\\u%04x" : "\\u%04X", scalar.value))
                    }
                default: put(String(scalar))
                }
            }
            if faulty("raw control", &rng) { out.append([0x00, 0x01, 0x0A, 0x09, 0x1F].randomElement(using: &rng)!) }
            if faulty("lone surrogate", &rng) { put(["\\ud800", "\\uDFFF", "\\ud834x", "\\ud834\\u0041", "\\udd1e\\ud834"].randomElement(using: &rng)!) }
            if faulty("bad escape", &rng) { put(["\\x41", "\\u12", "\\U0041", "\\'", "\\a", "\\u00G0"].randomElement(using: &rng)!) }
            if faulty("invalid UTF-8", &rng) {
                out += [[0xFF], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE6, 0x97], [0x80], [0xF8, 0x88, 0x80, 0x80, 0x80]]
                    .randomElement(using: &rng)!
            }
            put("\"")
        }

        mutating func number(_ rng: inout some RandomNumberGenerator) {
            if faulty("number", &rng) {
                put(["01", "1.", ".5", "+1", "-", "1e", "1e+", "0x10", "1.e3", "--1", "1_000", "١"].randomElement(using: &rng)!)
            } else {
                put(["0", "-0", "12", "3.25", "1e5", "-2.5E-3", "0.0", "1E+2", "123456789", "-9.75e10"].randomElement(using: &rng)!)
            }
        }

        mutating func literal(_ rng: inout some RandomNumberGenerator) {
            if faulty("literal", &rng) {
                put(["True", "nul", "undefined", "NaN", "Infinity", "-Infinity", "None", "truex"].randomElement(using: &rng)!)
            } else {
                put(["true", "false", "null"].randomElement(using: &rng)!)
            }
        }
    }
}
