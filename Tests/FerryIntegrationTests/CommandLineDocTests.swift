import FerryTestSupport
import Foundation
import Testing

/// docs/cli.md has a section for every subcommand `ferry --help` lists,
/// down to the leaves of groups such as `ferry items`, and none for a
/// subcommand that does not exist.
@Suite struct CommandLineDocTests {
    /// The names under `SUBCOMMANDS:` in a `--help` text.
    static func subcommands(in help: String) -> [String] {
        guard let start = help.range(of: "SUBCOMMANDS:\n") else { return [] }
        // The list ends at the first empty line (a "See 'ferry help …'" note follows it).
        let list = help[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false).prefix { !$0.isEmpty }
        return list.compactMap { line in
            // A name is indented by two spaces; its description's continuation lines by more.
            guard line.hasPrefix("  "), !line.hasPrefix("   "), let name = line.split(separator: " ").first else { return nil }
            return String(name)
        }
    }

    /// Every leaf subcommand path, such as `items put` or `cp`.
    static func leaves(under path: [String] = []) async throws -> [String] {
        guard path.count < 3 else { throw CancellationError() }  // a parser fault, not a deeper tree
        let help = try await runChecked(TestPaths.ferryBinary, path + ["--help"])
        let names = subcommands(in: help)
        if names.isEmpty { return [path.joined(separator: " ")] }
        var result: [String] = []
        for name in names where name != "help" { result += try await leaves(under: path + [name]) }
        return result
    }

    @Test func everySubcommandHasItsSection() async throws {
        let doc = try String(contentsOf: TestPaths.repositoryRoot.appendingPathComponent("docs/cli.md"), encoding: .utf8)
        let headings = doc.split(separator: "\n").filter { $0.hasPrefix("### ") }
        let documented = Set(headings.flatMap { heading in
            heading.split(separator: "`").filter { $0.hasPrefix("ferry ") }.map { String($0.dropFirst("ferry ".count)) }
        })
        let leaves = try await Self.leaves()
        #expect(leaves.count >= 20, "found only \(leaves): the help parser is broken")
        let missing = Set(leaves).subtracting(documented), stale = documented.subtracting(leaves)
        #expect(missing.isEmpty, "subcommands without a section in docs/cli.md: \(missing.sorted())")
        #expect(stale.isEmpty, "sections in docs/cli.md for subcommands that do not exist: \(stale.sorted())")
    }
}
