@testable import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// Invariant: an item's number is kept exactly as written, in one canonical
/// form per value, or the request is refused, as DynamoDB refuses it (more
/// than 38 significant digits, magnitude outside 1E-130 … 9.99…E+125). Never
/// rounded, never made zero, never another value in a stream record.
@Suite struct ItemNumberTests {
    /// Number texts, valid and not: any length of digits, leading and trailing
    /// zeros, exponents near the limits and far past them, and broken forms.
    static func numberText(_ rng: inout SeededGenerator) -> String {
        func digits(_ count: Int) -> String { String((0..<count).map { _ in "0123456789".randomElement(using: &rng)! }) }
        if Int.random(in: 0..<12, using: &rng) == 0 {
            return ["", "-", "+", ".", "e5", "1e", "1e+", "1.2.3", "--1", "1e5e5", "0x1F", "Infinity", "NaN", " 1", "1 ",
                    "1,5", "١", "-.", "1e-", "+-1", "1E+-2"].randomElement(using: &rng)!
        }
        var text = ["", "", "-", "+"].randomElement(using: &rng)!
        let shape = Int.random(in: 0..<4, using: &rng)
        let zeros = Int.random(in: 0...3, using: &rng) == 0 ? String(repeating: "0", count: Int.random(in: 1...5, using: &rng)) : ""
        let integer = digits([1, 2, 5, 17, 38, 39, 45][Int.random(in: 0..<7, using: &rng)])
        if shape != 3 { text += zeros + integer }
        if shape >= 1 {
            text += "." + digits(Int.random(in: shape == 3 ? 1...40 : 0...40, using: &rng))
            if Int.random(in: 0..<3, using: &rng) == 0 { text += String(repeating: "0", count: Int.random(in: 1...6, using: &rng)) }
        }
        if Int.random(in: 0..<2, using: &rng) == 0 {
            let exponent = Int.random(in: 0..<6, using: &rng) == 0 ? Int.random(in: -9_999_999...9_999_999, using: &rng)
                : Int.random(in: -175...170, using: &rng)
            text += ["e", "E"].randomElement(using: &rng)! + (exponent >= 0 && Bool.random(using: &rng) ? "+" : "") + String(exponent)
        }
        return text
    }

    /// Each text through DynamoNumber and through Python's decimal module with
    /// DynamoDB's documented limits; both take it (with the same canonical
    /// text, which boto3's TypeDeserializer reads back as the same value) or
    /// both refuse it.
    @Test func canonicalFormsMatchPythonsDecimal() async throws {
        let seed = FuzzReplay.seed, count = FuzzReplay.messages(default: 4000)
        print("DynamoNumber cross-check seed \(seed) (FERRY_FUZZ_SEED replays it), \(count) texts")
        var rng = SeededGenerator(seed: seed)
        let texts = (0..<count).map { _ in Self.numberText(&rng) }
        let script = TestPaths.python.appendingPathComponent("dynamo_number.py").path
        let oracle = try await runChecked("python3", [script], input: Data((texts.joined(separator: "\n") + "\n").utf8))
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        try #require(oracle.count >= texts.count)
        var taken = 0
        for (text, expected) in zip(texts, oracle) {
            let ours: String
            do {
                ours = try DynamoNumber.canonical(Array(text.utf8), field: "n")
                taken += 1
            } catch {
                ours = "refused"
                #expect(error.code == .invalidRequest && error.message.hasPrefix("'n' "), "\(error)")
            }
            #expect(ours == expected, "\(text.debugDescription): DynamoNumber \(ours), Python \(expected) (FERRY_FUZZ_SEED=\(seed))")
        }
        print("DynamoNumber cross-check: \(taken) taken, \(count - taken) refused")
        #expect(taken > count / 5 && count - taken > count / 5)
    }

    /// Numbers inside items, at any depth: a request's numbers come out as the
    /// oracle's canonical text, or the request is refused naming the attribute.
    @Test func anItemsNumbersAreExactOrTheRequestIsRefused() throws {
        let seed = FuzzReplay.seed
        var rng = SeededGenerator(seed: seed)
        for round in 0..<1_500 {
            // Only texts JSON allows as a number (the rest is StrictJSON's business).
            var number = Self.numberText(&rng)
            while StrictJSON.check(Array(number.utf8)) != nil || number.contains(" ") { number = Self.numberText(&rng) }
            let place = Int.random(in: 0..<3, using: &rng)
            let item = [#"{"id":"x","n":\#(number)}"#, #"{"id":"x","m":{"l":[true,\#(number)]}}"#,
                        #"{"id":"x","l":[[{"n":\#(number)}]]}"#][place]
            let path = ["item.n", "item.m.l[1]", "item.l[0][0].n"][place]
            let text = #"{"id":"r\#(round)","op":"putItem","table":"things","item":\#(item)}"#
            let expected = Result { () throws(FerryError) in try DynamoNumber.canonical(Array(number.utf8), field: path) }
            switch (RequestDecoder.decodeAny(Array(text.utf8)), expected) {
            case (.success(.item(let request)), .success(let canonical)):
                let got: AttributeValue? = switch place {
                case 0: request.item["n"]
                case 1: if case .map(let m)? = request.item["m"], case .list(let l)? = m["l"] { l[1] } else { nil }
                default: if case .list(let l)? = request.item["l"], case .list(let inner) = l[0], case .map(let m) = inner[0] { m["n"] } else { nil }
                }
                #expect(got == .number(canonical), "\(number) at \(path): \(String(describing: got)) (FERRY_FUZZ_SEED=\(seed))")
            case (.failure(let failure), .failure(let refusal)):
                #expect(failure.error.code == .invalidRequest && failure.error.message == refusal.message,
                        "\(number): \(failure.error) (FERRY_FUZZ_SEED=\(seed))")
                #expect(failure.error.message.hasPrefix("'\(path)' "), "\(failure.error)")
            case (let got, let want):
                Issue.record("\(number) at \(path): decoded \(got), expected \(want) (FERRY_FUZZ_SEED=\(seed))")
            }
        }
    }

    /// Wide and deep items within the limits read back whole: 25,000 attributes
    /// in one map and in one list (each added in place, not by copying the
    /// container: copied, the debug build took 12.8 s for this item, in place
    /// 0.4 s), and 32 levels of nesting.
    @Test func wideAndDeepItemsAreReadWhole() throws {
        let members = (0..<25_000).map { #""a\#($0)":\#($0)"# }.joined(separator: ",")
        let elements = (0..<25_000).map { "\($0).5" }.joined(separator: ",")
        let deep = String(repeating: #"{"d":"#, count: 31) + "[1]" + String(repeating: "}", count: 31)
        let text = #"{"id":"w","op":"putItem","table":"things","item":{"id":"w","wide":{\#(members)},"long":[\#(elements)],"deep":\#(deep)}}"#
        guard case .success(.item(let request)) = RequestDecoder.decodeAny(Array(text.utf8)) else {
            Issue.record("refused: \(RequestDecoder.decodeAny(Array(text.utf8)))")
            return
        }
        guard case .map(let wide)? = request.item["wide"], case .list(let long)? = request.item["long"] else {
            Issue.record("wrong shapes"); return
        }
        #expect(wide.count == 25_000 && wide["a24999"] == .number("24999"))
        #expect(long.count == 25_000 && long[12_345] == .number("12345.5"))
        let tooDeep = String(repeating: #"{"d":"#, count: 32) + "[1]" + String(repeating: "}", count: 32)
        let refused = RequestDecoder.decodeAny(Array(#"{"id":"w","op":"putItem","table":"things","item":{"id":"w","deep":\#(tooDeep)}}"#.utf8))
        guard case .failure(let failure) = refused else { Issue.record("33 levels taken"); return }
        #expect(failure.error.message.contains("nested deeper than 32 levels"), "\(failure.error)")
    }

    /// In DynamoDB 3, 3.0, 3e0 and 0.3E1 are one key: here too.
    @Test func equalNumbersAreOneKey() throws {
        var keys: Set<AttributeValue> = []
        for written in ["3", "3.0", "3e0", "0.3E1", "30e-1", "3.000000000000000000000000000000000000000000000000"] {
            let text = #"{"id":"k","op":"deleteItem","table":"things","key":{"id":\#(written)}}"#
            guard case .success(.item(let request)) = RequestDecoder.decodeAny(Array(text.utf8)) else {
                Issue.record("\(written) refused"); continue
            }
            keys.insert(try #require(request.key["id"]))
        }
        #expect(keys == [.number("3")])
    }

    /// What Foundation's reader did to these before: cut to 38 digits, made zero, turned 1E2 into 100.0.
    @Test func numbersFoundationChangedAreKeptOrRefused() throws {
        func decoded(_ number: String) -> Result<AttributeValue?, FerryError> {
            let text = #"{"id":"f","op":"putItem","table":"things","item":{"id":"x","n":\#(number)}}"#
            switch RequestDecoder.decodeAny(Array(text.utf8)) {
            case .success(.item(let request)): return .success(request.item["n"])
            case .failure(let failure): return .failure(failure.error)
            default: return .success(nil)
            }
        }
        #expect(try decoded("12345678901234567890123456789012345678").get() == .number("12345678901234567890123456789012345678"))
        #expect(try decoded("1E2").get() == .number("100"))
        #expect(try decoded("12.50").get() == .number("12.5"))
        #expect(try decoded("1e-130").get() == .number("0." + String(repeating: "0", count: 129) + "1"))
        #expect(try decoded("9.99e125").get() == .number("9.99E+125"))
        for refused in ["1234567890123456789012345678901234567890123", "1e-400", "1e300", "1e126", "1.5e-131"] {
            guard case .failure(let error) = decoded(refused) else { Issue.record("\(refused) taken"); continue }
            #expect(error.code == .invalidRequest && error.message.contains("'item.n'"), "\(error)")
        }
    }

    /// The client's writer and the worker's reader agree: what one writes, the other reads as the same item.
    @Test func writtenItemsReadBackTheSame() throws {
        let item: AttributeMap = ["id": .string("a\"b\\c\n\u{1}"), "n": .number("1e-130"), "big": .number("9.99e125"),
                                  "l": .list([.number("3.0"), .null, .bool(true), .map(["x": .number("-0")])]),
                                  "ss": .stringSet(["p", "q"]), "b": .binary([0, 255])]
        let text = try ItemJSONText.text(item, field: "item")
        let read = try ItemJSONText.map(text, field: "item")
        #expect(read["n"] == .number("0." + String(repeating: "0", count: 129) + "1"))
        #expect(read["big"] == .number("9.99E+125"))
        #expect(read["l"] == .list([.number("3"), .null, .bool(true), .map(["x": .number("0")])]))
        #expect(read["id"] == item["id"])
        #expect(read["ss"] == .list([.string("p"), .string("q")]))
        #expect(read["b"] == .string("AP8="))
        #expect(throws: FerryError.self) { try ItemJSONText.text(["n": .number("1e400")], field: "item") }
        #expect(throws: FerryError.self) { try ItemJSONText.text(["n": .number("12abc")], field: "item") }
    }

    /// `orderKey` orders any two numbers as Python's decimal module does: byte
    /// order of the keys is numeric order, exact at any length of digits.
    @Test func orderKeysOrderAsDecimalsDo() async throws {
        let seed = FuzzReplay.seed
        var rng = SeededGenerator(seed: seed)
        var pairs: [(String, String, String, String)] = []
        while pairs.count < 3_000 {
            let a = Self.numberText(&rng)
            // Near neighbours too: the same digits with one changed, or extended.
            let b = Bool.random(using: &rng) ? Self.numberText(&rng) : a + (a.contains("e") || a.contains("E") ? "" : "1")
            guard let x = DynamoNumber.orderKey(a), let y = DynamoNumber.orderKey(b) else { continue }
            pairs.append((a, b, x, y))
        }
        let compare = """
            import sys
            from decimal import Context
            exact = Context(prec=100000, Emax=999999999, Emin=-999999999)
            for line in sys.stdin:
                a, b = line.split()
                x, y = exact.create_decimal(a), exact.create_decimal(b)
                print(-1 if x < y else (1 if x > y else 0))
            """
        let input = pairs.map { "\($0.0) \($0.1)" }.joined(separator: "\n") + "\n"
        let verdicts = try await runChecked("python3", ["-c", compare], input: Data(input.utf8)).split(separator: "\n").map(String.init)
        try #require(verdicts.count == pairs.count)
        for ((a, b, x, y), verdict) in zip(pairs, verdicts) {
            let ours = x == y ? "0" : (x.utf8.lexicographicallyPrecedes(y.utf8) ? "-1" : "1")
            #expect(ours == verdict, "\(a) vs \(b): keys \(x) \(y) say \(ours), Python \(verdict) (FERRY_FUZZ_SEED=\(seed))")
        }
    }
}
