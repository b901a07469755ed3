import Foundation

/// Hostile variants of a valid JSON document, for inputs whose shape others
/// define (stores' notifications, control messages): one to three mutations at
/// random nodes of the document's tree — any node replaced by a value of
/// another type, a hostile string or a number past a boundary, removed,
/// duplicated under the same name, given hostile siblings or buried deep — or
/// the whole text truncated, prefixed or replaced by raw bytes. Values that
/// `JSONSerialization` cannot hold (`1e400`, nesting 5,000 deep, duplicate
/// names) go in as text through placeholders.
public enum HostileJSON {
    public struct Variant: Sendable, CustomStringConvertible {
        public var bytes: [UInt8]
        /// What was done, for failure reports.
        public var mutations: [String]

        public var description: String {
            "\(mutations) (\(bytes.count) bytes: \(String(decoding: bytes.prefix(300), as: UTF8.self).debugDescription))"
        }
    }

    public static func variant(of json: String, _ rng: inout some RandomNumberGenerator) -> Variant {
        if Int.random(in: 0..<10, using: &rng) == 0 { return raw(json, &rng) }
        guard var root = try? JSONSerialization.jsonObject(with: Data(json.utf8), options: [.fragmentsAllowed]) else {
            preconditionFailure("HostileJSON needs a valid document to start from")
        }
        var texts: [String: String] = [:]
        var mutations: [String] = []
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            mutations.append(mutate(&root, texts: &texts, &rng))
        }
        guard var text = (try? JSONSerialization.data(withJSONObject: root, options: [.sortedKeys, .fragmentsAllowed]))
            .map({ String(decoding: $0, as: UTF8.self) }) else { return raw(json, &rng) }
        // Placeholders are strings: swap each (with its quotes) for its raw text.
        for (placeholder, replacement) in texts {
            text = text.replacingOccurrences(of: HostileInput.jsonString(placeholder), with: replacement)
        }
        return Variant(bytes: Array(text.utf8), mutations: mutations)
    }

    private enum Step: Hashable { case member(String), element(Int) }

    /// Every node's path, the root's (empty) included.
    private static func paths(of node: Any, at path: [Step] = []) -> [[Step]] {
        var all = [path]
        if let object = node as? [String: Any] {
            // In name order: a dictionary's own order changes from run to run, and a seed must replay.
            for name in object.keys.sorted() { all += paths(of: object[name]!, at: path + [.member(name)]) }
        } else if let array = node as? [Any] {
            for (index, child) in array.enumerated() { all += paths(of: child, at: path + [.element(index)]) }
        }
        return all
    }

    /// Applies `change` to the node at `path` (nil from `change` removes it).
    private static func edit(_ node: inout Any, at path: ArraySlice<Step>, _ change: (Any) -> Any?) {
        guard let step = path.first else { return }
        let rest = path.dropFirst()
        switch step {
        case .member(let name):
            guard var object = node as? [String: Any], var child = object[name] else { return }
            if rest.isEmpty { object[name] = change(child) } else { edit(&child, at: rest, change); object[name] = child }
            node = object
        case .element(let index):
            guard var array = node as? [Any], array.indices.contains(index) else { return }
            if rest.isEmpty {
                if let new = change(array[index]) { array[index] = new } else { array.remove(at: index) }
            } else {
                var child = array[index]
                edit(&child, at: rest, change)
                array[index] = child
            }
            node = array
        }
    }

    private static func mutate(_ root: inout Any, texts: inout [String: String], _ rng: inout some RandomNumberGenerator) -> String {
        let path = paths(of: root).randomElement(using: &rng)!
        let place = path.map { step -> String in
            switch step { case .member(let name): ".\(name)"; case .element(let index): "[\(index)]" }
        }.joined()
        func placeholder(_ text: String) -> String {
            let name = "\u{E000}ferry-placeholder-\(texts.count)\u{E000}"
            texts[name] = text
            return name
        }
        let what = Int.random(in: 0..<10, using: &rng)
        let replacement: Any?
        let label: String
        switch what {
        case 0:
            let text = HostileInput.jsonValue(&rng)
            replacement = placeholder(text); label = "value \(text.prefix(40))"
        case 1:
            let key = HostileInput.key(&rng)
            replacement = key; label = "key-like string \(key.debugDescription.prefix(40))"
        case 2:
            let value = HostileInput.headerValue(&rng)
            replacement = value; label = "header-like string \(value.debugDescription.prefix(40))"
        case 3:
            let number = HostileInput.numberLiterals.randomElement(using: &rng)!
            replacement = placeholder(number); label = "number \(number)"
        case 4:
            replacement = nil; label = "removed"
        case 5:
            let size = [1_000, 70_000, 400_000].randomElement(using: &rng)!
            replacement = String(repeating: ["a", "é", "\u{0}", "/"].randomElement(using: &rng)!, count: size)
            label = "string of \(size) characters"
        case 6:
            replacement = placeholder(String(repeating: "[", count: 3000) + String(repeating: "]", count: 3000)); label = "nested 3000 deep"
        default:
            // On an object: a hostile member, or a second member with an existing name; otherwise wrapped.
            var label = ""
            func change(_ node: Any) -> Any {
                guard var object = node as? [String: Any], Bool.random(using: &rng) else {
                    label = "wrapped"
                    return Bool.random(using: &rng) ? [node] : ["wrapped": node]
                }
                if let existing = object.keys.sorted().randomElement(using: &rng), Bool.random(using: &rng) {
                    object[placeholder(HostileInput.jsonString(existing))] = placeholder(HostileInput.jsonValue(&rng))
                    label = "member \(existing) twice"
                } else {
                    let name = HostileInput.pieces.randomElement(using: &rng)!
                    object[name] = placeholder(HostileInput.jsonValue(&rng))
                    label = "added member \(name.debugDescription.prefix(30))"
                }
                return object
            }
            if path.isEmpty { root = change(root) } else { edit(&root, at: path[...]) { change($0) } }
            return "\(place.isEmpty ? "root" : place): \(label)"
        }
        if path.isEmpty {
            root = replacement ?? NSNull()
        } else {
            edit(&root, at: path[...]) { _ in replacement }
        }
        return "\(place.isEmpty ? "root" : place): \(label)"
    }

    /// The document as raw bytes gone wrong.
    private static func raw(_ json: String, _ rng: inout some RandomNumberGenerator) -> Variant {
        let bytes = Array(json.utf8)
        switch Int.random(in: 0..<5, using: &rng) {
        case 0:
            let cut = Int.random(in: 0..<max(1, bytes.count), using: &rng)
            return Variant(bytes: Array(bytes.prefix(cut)), mutations: ["truncated at \(cut)"])
        case 1: return Variant(bytes: [0xEF, 0xBB, 0xBF] + bytes, mutations: ["BOM prefix"])
        case 2:
            var copy = bytes
            for _ in 0..<3 where !copy.isEmpty { copy[Int.random(in: 0..<copy.count, using: &rng)] = [0xC0, 0xFF, 0x80, 0x00].randomElement(using: &rng)! }
            return Variant(bytes: copy, mutations: ["invalid UTF-8 bytes"])
        case 3:
            return Variant(bytes: (0..<Int.random(in: 0...300, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) },
                           mutations: ["random bytes"])
        default: return Variant(bytes: [], mutations: ["empty"])
        }
    }
}
