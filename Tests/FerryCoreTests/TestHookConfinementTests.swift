import FerryTestSupport
import Foundation
import Testing

/// The test suite's fault hooks stay out of release builds: every mention of
/// a `FERRY_TEST_` variable in Sources and triggers, comments aside, lies
/// inside an `#if FERRY_TEST_HOOKS` branch, which only the `TestHooks` trait
/// compiles (`strings` on a release binary then finds none).
@Suite struct TestHookConfinementTests {
    /// Lines naming `FERRY_TEST_` outside `#if FERRY_TEST_HOOKS`, as `file:line`.
    static func unconfined(in directory: URL) throws -> [String] {
        var found: [String] = []
        let files = FileManager.default.enumerator(atPath: directory.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        for file in files.sorted() {
            let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            // One entry per open #if: whether the branch being read is the hooks' own.
            var branches: [Bool] = []
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.hasPrefix("#if") {
                    branches.append(trimmed == "#if FERRY_TEST_HOOKS")
                    continue
                }
                if trimmed.hasPrefix("#else") || trimmed.hasPrefix("#elseif"), !branches.isEmpty {
                    branches[branches.count - 1] = false
                    continue
                }
                if trimmed.hasPrefix("#endif") {
                    _ = branches.popLast()
                    continue
                }
                guard line.contains("FERRY_TEST_"), !trimmed.hasPrefix("//"), !branches.contains(true) else { continue }
                found.append("\(directory.lastPathComponent)/\(file):\(number + 1)")
            }
        }
        return found
    }

    @Test func everyTestHookIsCompiledOnlyWithTheTrait() throws {
        for directory in ["Sources", "triggers"] {
            let found = try Self.unconfined(in: TestPaths.repositoryRoot.appendingPathComponent(directory))
            #expect(found.isEmpty, "FERRY_TEST_ outside #if FERRY_TEST_HOOKS: \(found)")
        }
    }

    /// The scan itself: a hook outside the condition is found, one inside is not.
    @Test func theScanFindsAnUnconfinedHook() throws {
        let directory = try TestPaths.temporaryDirectory("hook-scan")
        defer { try? FileManager.default.removeItem(at: directory) }
        try """
            #if FERRY_TEST_HOOKS
            let a = "FERRY_TEST_A"
            #else
            let a = ""
            #endif
            // FERRY_TEST_B in a comment is no string in the binary
            let b = env["FERRY_TEST_B"]
            """.write(to: directory.appendingPathComponent("x.swift"), atomically: true, encoding: .utf8)
        #expect(try Self.unconfined(in: directory) == ["\(directory.lastPathComponent)/x.swift:7"])
    }
}
