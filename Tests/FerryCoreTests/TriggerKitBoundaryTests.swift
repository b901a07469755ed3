import FerryTestSupport
import Foundation
import Testing

/// The trigger kit is the whole of Ferry a handler sees: the handlers in
/// `triggers/` import no other Ferry module, and the kit itself imports none
/// of the runtime's (Kafka, curl, S3 client, store, engine, worker) and
/// re-exports nothing.
@Suite struct TriggerKitBoundaryTests {
    /// `(file, module)` for every import in the Swift files of `directory`.
    static func imports(in directory: URL) throws -> [(file: String, module: String, exported: Bool)] {
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".swift") }.sorted()
        return try files.flatMap { file in
            try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
                .split(separator: "\n").compactMap { line -> (String, String, Bool)? in
                    let words = line.split(separator: " ").map(String.init).filter { !$0.hasPrefix("@") || $0 == "@_exported" }
                    guard let at = words.firstIndex(of: "import"), at + 1 < words.count, words[..<at].allSatisfy({ $0 == "@_exported" }) else { return nil }
                    // `import struct M.T` names its kind before the module.
                    let named = ["struct", "class", "enum", "protocol", "typealias", "func", "var", "let"].contains(words[at + 1]) && at + 2 < words.count
                        ? words[at + 2] : words[at + 1]
                    return (file, String(named.split(separator: ".")[0]), words[..<at].contains("@_exported"))
                }
        }
    }

    static let runtimeModules: Set<String> = ["FerryConcurrency", "FerryKafka", "FerryS3", "FerryStore", "FerryEngine", "FerryTables", "FerryTriggers",
                                              "FerryWorker", "FerryClient", "CRdKafka", "CCurl", "CFerryCurlShim", "CFerryOpenSSL",
                                              "CFerrySQLite", "CFerryProcess", "CFerryChecksum"]

    @Test func handlersImportOnlyTheKitOfFerry() throws {
        let found = try Self.imports(in: TestPaths.repositoryRoot.appendingPathComponent("triggers"))
        #expect(found.contains { $0.module == "FerryTriggerKit" })
        let other = found.filter { ($0.module.hasPrefix("Ferry") || $0.module.hasPrefix("CFerry") || Self.runtimeModules.contains($0.module))
                                    && $0.module != "FerryTriggerKit" }
        #expect(other.isEmpty, "handlers import more of Ferry than the kit: \(other.map { "\($0.file): \($0.module)" })")
    }

    @Test func theKitImportsNothingOfTheRuntimeAndReexportsNothing() throws {
        let found = try Self.imports(in: TestPaths.repositoryRoot.appendingPathComponent("Sources/FerryTriggerKit"))
        #expect(!found.isEmpty)
        let runtime = found.filter { Self.runtimeModules.contains($0.module) }
        #expect(runtime.isEmpty, "the kit imports the runtime: \(runtime.map { "\($0.file): \($0.module)" })")
        let exported = found.filter(\.exported)
        #expect(exported.isEmpty, "the kit re-exports: \(exported.map { "\($0.file): \($0.module)" })")
    }

    /// The scan itself: plain, attributed, re-exported and kind-qualified imports are all seen.
    @Test func theScanSeesEveryKindOfImport() throws {
        let directory = try TestPaths.temporaryDirectory("import-scan")
        defer { try? FileManager.default.removeItem(at: directory) }
        try "import Foundation\n@testable import FerryS3\n@_exported import FerryCore\nimport struct FerryKafka.KafkaProducer\nlet important = 1\n"
            .write(to: directory.appendingPathComponent("x.swift"), atomically: true, encoding: .utf8)
        let found = try Self.imports(in: directory)
        #expect(found.map(\.module) == ["Foundation", "FerryS3", "FerryCore", "FerryKafka"])
        #expect(found.map(\.exported) == [false, false, true, false])
    }
}
