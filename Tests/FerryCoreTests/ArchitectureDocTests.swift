import FerryTestSupport
import Foundation
import Testing

/// docs/internals/architecture.md's module table says which Ferry modules each module
/// uses; Package.swift decides it. They must agree, so the page cannot drift.
@Suite struct ArchitectureDocTests {
    /// Target name → the Ferry modules among its dependencies, from Package.swift.
    static func packageGraph() throws -> [String: Set<String>] {
        let text = try String(contentsOf: TestPaths.repositoryRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        var graph: [String: Set<String>] = [:]
        for marker in [".target(name: \"", ".executableTarget(name: \""] {
            var rest = text[...]
            while let start = rest.range(of: marker) {
                rest = rest[start.upperBound...]
                guard let nameEnd = rest.firstIndex(of: "\"") else { break }
                let name = String(rest[..<nameEnd])
                // This target's declaration ends where the next one starts.
                let end = [".target(", ".testTarget(", ".executableTarget(", ".systemLibrary("]
                    .compactMap { rest.range(of: $0)?.lowerBound }.min() ?? rest.endIndex
                let declaration = rest[..<end]
                var uses = Set<String>()
                if let open = declaration.range(of: "dependencies: ["), let close = declaration[open.upperBound...].firstIndex(of: "]") {
                    uses = Self.ferryNames(in: declaration[open.upperBound..<close])
                }
                graph[name] = uses
            }
        }
        return graph
    }

    static func ferryNames(in text: Substring) -> Set<String> {
        Set(text.split(whereSeparator: { !($0.isLetter || $0.isNumber) }).map(String.init).filter { $0.hasPrefix("Ferry") })
    }

    /// Module → the modules its row names, for the rows that list them.
    static func documentedGraph() throws -> [String: Set<String>] {
        let text = try String(contentsOf: TestPaths.repositoryRoot.appendingPathComponent("docs/internals/architecture.md"), encoding: .utf8)
        var graph: [String: Set<String>] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 4, let name = cells[1].split(separator: "`").first.map(String.init) else { continue }
            let uses = cells[3]
            guard uses == "none" || uses.hasPrefix("Ferry") else { continue }  // "all", "all of the above"
            graph[name] = uses == "none" ? [] : Self.ferryNames(in: uses[...])
        }
        return graph
    }

    @Test func theModuleTableIsThePackagesGraph() throws {
        let package = try Self.packageGraph(), documented = try Self.documentedGraph()
        #expect(documented.count >= 10, "the table lost its rows: \(documented.keys.sorted())")
        for (module, uses) in documented {
            let actual = try #require(package[module], "docs/internals/architecture.md names \(module), which Package.swift does not have")
            #expect(uses == actual, "\(module): the page says \(uses.sorted()), Package.swift \(actual.sorted())")
        }
        let libraries = package.keys.filter { $0.hasPrefix("Ferry") && $0 != "FerryTestSupport" && !$0.hasSuffix("Tests") }
        let missing = Set(libraries).subtracting(documented.keys).subtracting(["FerryWorker"])
        #expect(missing.isEmpty, "modules the page does not describe: \(missing.sorted())")
    }
}
