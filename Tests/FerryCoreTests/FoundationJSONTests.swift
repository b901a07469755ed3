import FerryCore
import FerryTestSupport
import Foundation
import PropertyBased
import Testing

/// Invariant: `FoundationJSON` reads every string and name as JSONEncoder
/// wrote it, and answers as `JSONSerialization` does wherever that reader
/// keeps what was written.
@Suite struct FoundationJSONTests {
    @Test func everyStringAndNameReadsBackAsWritten() async {
        await propertyCheck(count: 1000, input: HostileInput.keys) { key in
            let object = ["v": key, key: "name"]
            guard let data = try? JSONEncoder().encode(object) else { return }
            let read = try? FoundationJSON.object(Array(data)) as? [String: String]
            #expect(read?["v"] == key && read?[key] == "name", "\(key.unicodeScalars.map { String($0.value, radix: 16) })")
        }
    }

    @Test func foundationsReaderDropsTheMarkThatThisKeeps() throws {
        let text = Array("{\"k\":\"\u{FEFF}public/a\"}".utf8)
        #expect((try JSONSerialization.jsonObject(with: Data(text)) as? [String: String])?["k"] == "public/a")  // why this exists
        #expect((try FoundationJSON.object(text) as? [String: String])?["k"] == "\u{FEFF}public/a")
    }

    /// Only strings change: a mark outside them (a document's leading one),
    /// escapes and the rest are handed over as they are.
    @Test(arguments: ["\u{FEFF}{\"a\":1}", "{\"a\":\"\\\\\u{FEFF}x\"}", "{\"a\\\"\u{FEFF}\":\"\u{FEFF}\"}", "[\"\u{FEFF}\",\"\u{FEFF}\u{FEFF}\"]", "{\"a\":\"\\ufeffb\"}"])
    func onlyMarksInsideStringsAreEscaped(text: String) throws {
        let foundation = try? JSONSerialization.jsonObject(with: Data(text.utf8))
        let ours = try? FoundationJSON.object(Array(text.utf8))
        #expect((foundation == nil) == (ours == nil), "\(text.debugDescription)")
        guard let ours else { return }
        let expected = try JSONDecoder().decode(Value.self, from: Data(text.drop { $0 == "\u{FEFF}" }.utf8))
        #expect(Value(ours) == expected, "\(text.debugDescription)")
    }

    /// A comparable reading of what JSON holds here (strings, numbers, lists, objects).
    enum Value: Decodable, Equatable {
        case string(String), number(Double), list([Value]), object([String: Value])

        init(from decoder: any Decoder) throws {
            let single = try decoder.singleValueContainer()
            if let s = try? single.decode(String.self) { self = .string(s) }
            else if let n = try? single.decode(Double.self) { self = .number(n) }
            else if let l = try? single.decode([Value].self) { self = .list(l) }
            else { self = .object(try single.decode([String: Value].self)) }
        }

        init(_ any: Any) {
            switch any {
            case let s as String: self = .string(s)
            case let l as [Any]: self = .list(l.map(Value.init))
            case let o as [String: Any]: self = .object(o.mapValues(Value.init))
            case let n as NSNumber: self = .number(n.doubleValue)
            default: self = .string("\(any)")
            }
        }
    }
}
