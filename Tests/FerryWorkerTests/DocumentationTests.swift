import FerryTestSupport
import FerryWorker
import Foundation
import Testing

/// The README is a front door, every relative link in the docs leads
/// somewhere, and the configuration reference lists exactly the settings
/// `ferry worker` has. Each is a property of files in the repository, so a
/// change that breaks one fails here instead of misleading a reader.
@Suite struct DocumentationTests {
    static let root = TestPaths.repositoryRoot

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// README.md, the top-level guides and every Markdown file under docs/.
    static func markdownFiles() throws -> [String] {
        var files = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md", "BENCHMARKS.md", "Benchmarks/NOTES.md", "triggers/README.md"]
        let docs = root.appendingPathComponent("docs")
        let walker = FileManager.default.enumerator(at: docs, includingPropertiesForKeys: nil)
        while let url = walker?.nextObject() as? URL {
            if url.pathExtension == "md" { files.append("docs/" + url.path.dropFirst(docs.path.count + 1)) }
        }
        return files
    }

    /// The text outside fenced code blocks, where links are links.
    static func prose(_ text: String) -> String {
        var inFence = false
        return text.split(separator: "\n", omittingEmptySubsequences: false).filter { line in
            if line.hasPrefix("```") { inFence.toggle(); return false }
            return !inFence
        }.joined(separator: "\n")
    }

    /// Link targets of the form `](target)`.
    static func linkTargets(in text: String) -> [String] {
        var targets: [String] = []
        var rest = text[...]
        while let open = rest.range(of: "](") {
            rest = rest[open.upperBound...]
            guard let close = rest.firstIndex(of: ")") else { break }
            let target = String(rest[..<close])
            if !target.contains(" ") { targets.append(target) }
            rest = rest[close...]
        }
        return targets
    }

    /// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
    static func anchor(of heading: String) -> String {
        String(heading.lowercased().unicodeScalars.compactMap { c -> Character? in
            if c == " " { return "-" }
            if c == "-" || c == "_" || CharacterSet.alphanumerics.contains(c) { return Character(c) }
            return nil
        })
    }

    static func anchors(in text: String) -> Set<String> {
        var result = Set<String>()
        for line in prose(text).split(separator: "\n") {
            if line.hasPrefix("#") {
                result.insert(anchor(of: line.drop(while: { $0 == "#" }).trimmingCharacters(in: .whitespaces)))
            }
            var rest = line[...]
            while let start = rest.range(of: "<a id=\"") {
                rest = rest[start.upperBound...]
                if let end = rest.firstIndex(of: "\"") { result.insert(String(rest[..<end])) }
            }
        }
        return result
    }

    @Test func theReadmeIsAFrontDoor() throws {
        let lines = try Self.text("README.md").split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count <= 400, "README.md has \(lines.count) lines; guides belong in docs/")
        for (number, line) in lines.enumerated() {
            #expect(line.count <= 300, "README.md:\(number + 1) has \(line.count) characters")
            let words = line.split(whereSeparator: { !($0.isLetter || $0.isNumber) })
            let testNames = words.filter { $0.count > 5 && $0.hasSuffix("Tests") && $0.first!.isUppercase }
            #expect(testNames.isEmpty, "README.md:\(number + 1) names tests \(testNames); they stay in the tests")
        }
        let firstScreen = lines.prefix(40).joined(separator: "\n")
        #expect(firstScreen.contains("scripts/demo.sh") && firstScreen.contains("scripts/test.sh"),
                "the two commands are not in the README's first 40 lines")
        let ci = try Self.text(".ci/run")
        #expect(ci.contains("scripts/test.sh"), ".ci/run does not call the README's test command")
    }

    /// BENCHMARKS.md is the method and the latest figures; the history of rounds stays in Benchmarks/NOTES.md.
    @Test func theBenchmarkPageIsTheLatestResults() throws {
        let lines = try Self.text("BENCHMARKS.md").split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count <= 300, "BENCHMARKS.md has \(lines.count) lines")
        let rounds = lines.filter { $0.hasPrefix("## ") && $0.contains("round") }
        #expect(rounds.count <= 1, "BENCHMARKS.md copies rounds of notes: \(rounds)")
    }

    @Test func everyRelativeLinkLeadsSomewhere() throws {
        var checked = 0
        for file in try Self.markdownFiles() {
            let base = Self.root.appendingPathComponent(file).deletingLastPathComponent()
            for target in Self.linkTargets(in: Self.prose(try Self.text(file))) {
                if target.contains("://") || target.hasPrefix("mailto:") { continue }
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                let path = String(parts[0]), fragment = parts.count > 1 ? String(parts[1]) : nil
                let destination = path.isEmpty ? Self.root.appendingPathComponent(file) : base.appendingPathComponent(path).standardized
                checked += 1
                guard FileManager.default.fileExists(atPath: destination.path) else {
                    Issue.record("\(file): link to \(target), which does not exist"); continue
                }
                if let fragment, destination.pathExtension == "md" {
                    let text = try String(contentsOf: destination, encoding: .utf8)
                    #expect(Self.anchors(in: text).contains(fragment), "\(file): link to \(target), which has no such heading")
                }
            }
        }
        #expect(checked > 50, "only \(checked) links found: the scan is broken")
    }

    /// The rows of the reference's table: file keys, flags and variables, as written in backquotes.
    static func referenceRows() throws -> [(keys: Set<String>, flags: Set<String>, variables: Set<String>)] {
        let text = try Self.text("docs/operators/configuration.md")
        func quoted(_ cell: Substring) -> Set<String> {
            let pieces = cell.split(separator: "`", omittingEmptySubsequences: false)
            return Set(stride(from: 1, to: pieces.count, by: 2).map { String(pieces[$0].split(separator: " ").first ?? "") })
        }
        return text.split(separator: "\n").filter { $0.hasPrefix("| `") }.map { line in
            // `\|` is a bar inside a cell (`--log-format text\|json`), not a cell's end.
            let cells = line.replacingOccurrences(of: "\\|", with: "/").split(separator: "|", omittingEmptySubsequences: false)
            return (quoted(cells[1]), quoted(cells[2]), quoted(cells[3]))
        }
    }

    @Test func theConfigurationReferenceListsExactlyTheSettings() throws {
        let rows = try Self.referenceRows()
        let keys = rows.reduce(into: Set<String>()) { $0.formUnion($1.keys) }
        let settings = Set(SettingKey.allCases.map(\.rawValue))
        #expect(keys == settings, "documented but not a setting: \(keys.subtracting(settings).sorted()); a setting not documented: \(settings.subtracting(keys).sorted())")
        for setting in SettingKey.allCases {
            guard let row = rows.first(where: { $0.keys.contains(setting.rawValue) }) else { continue }
            #expect(row.flags.contains(setting.flag), "\(setting.rawValue): its row does not name \(setting.flag)")
            for variable in setting.environment {
                #expect(row.variables.contains(variable), "\(setting.rawValue): its row does not name \(variable)")
            }
        }
    }

    @Test func theLinkScanSeesWhatItShould() {
        let text = "see [a](docs/a.md#b-c) and [x](https://e.com)\n```\n[not](a link)\n```\n## B, C!"
        #expect(Self.linkTargets(in: Self.prose(text)) == ["docs/a.md#b-c", "https://e.com"])
        #expect(Self.anchors(in: text) == ["b-c"])
        #expect(Self.anchor(of: "Request JSON (`ferry.requests`)") == "request-json-ferryrequests")
    }
}
