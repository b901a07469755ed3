import FerryTestSupport
import Foundation
import Testing

/// A configuration file is an operator's input, and gets the same guarantee
/// as a request: `ferry config check` (which validates exactly what
/// `ferry worker` would start with) answers every generated variant of a
/// complete file — JSON is YAML, so `HostileJSON` makes them — with exit 0,
/// or 64 and a reason on stderr; never a trap, another status, or no answer.
///
/// `FERRY_FUZZ_SEED` replays a run; `FERRY_FUZZ_MESSAGES` sets its size (default 100).
@Suite struct HostileConfigurationTests {
    static let file = #"""
    {"worker":{"dataRoot":"DATA","stateDir":"STATE","maxTransfers":8,"shutdownGrace":30,"rebalanceGrace":10,"sweepAfter":86400},
     "kafka":{"bootstrapServers":"127.0.0.1:9092","properties":{"compression.type":"lz4"}},
     "s3":{"endpoint":"http://127.0.0.1:9000","region":"us-east-1"},
     "transfers":{"partSize":"8MiB","partConcurrency":5,"checksum":"CRC32C","timeout":600},
     "items":{"tables":["posts:id:delete-files"]},
     "access":{"prefixGuest":"public/","guestPermissions":{"guest":["read","write"]},"copySourceBuckets":["shared"]},
     "http":{"address":"127.0.0.1:9090"},
     "log":{"level":"info","format":"json"},
     "triggers":[{"name":"notify","type":"webhook","url":"https://hooks.example.com/ferry","events":["ObjectCreated:*"],
                  "prefix":"public/uploads/","maximumRetryAttempts":2,"headers":{"Authorization":"Bearer x"}},
                 {"name":"big","type":"kafka","topic":"analytics.objects","table":"objects","viewType":"NEW_IMAGE","batchSize":500,
                  "filters":[{"eventName":["INSERT"],"dynamodb":{"NewImage":{"size":{"N":[{"numeric":[">",1000000]}]}}}}]}]}
    """#

    @Test func everyConfigurationIsValidOrRefusedWithAReason() async throws {
        let seed = FuzzReplay.seed, total = FuzzReplay.messages(default: 100)
        print("hostile configurations: seed \(seed), \(total) files (replay with FERRY_FUZZ_SEED=\(seed) FERRY_FUZZ_MESSAGES=\(total))")
        let base = try TestPaths.temporaryDirectory("fuzz-config")
        defer { try? FileManager.default.removeItem(at: base) }
        for name in ["data", "state"] { try FileManager.default.createDirectory(at: base.appendingPathComponent(name), withIntermediateDirectories: true) }
        let valid = Self.file.replacingOccurrences(of: "DATA", with: base.appendingPathComponent("data").path)
            .replacingOccurrences(of: "STATE", with: base.appendingPathComponent("state").path)
        let environment = ["AWS_ACCESS_KEY_ID": "fuzz", "AWS_SECRET_ACCESS_KEY": "fuzz", "AWS_EC2_METADATA_DISABLED": "true"]
        let path = base.appendingPathComponent("worker.yaml")
        try Data(valid.utf8).write(to: path)
        let first = try await runCommand(TestPaths.ferryBinary, ["config", "check", "--config", path.path], environment: environment, timeout: 60)
        try #require(first.status == 0, "the file the variants start from is valid: \(first.stderr)")

        var rng = HostileInput.rng(seed: seed)
        var outcomes: [Int32: Int] = [:]
        for index in 0..<total {
            let variant = HostileJSON.variant(of: valid, &rng)
            try Data(variant.bytes).write(to: path)
            let result = try await runCommand(TestPaths.ferryBinary, ["config", "check", "--config", path.path], environment: environment, timeout: 60)
            outcomes[result.status, default: 0] += 1
            #expect(result.status == 0 || result.status == 64,
                    "seed \(seed), file \(index): exit \(result.status): \(result.stderr.suffix(1500)) from \(variant)")
            if result.status == 64 {
                #expect(!result.stderr.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "seed \(seed), file \(index): refused without a reason")
            }
            #expect(!result.stderr.contains("Fatal error"), "seed \(seed), file \(index): a trap: \(result.stderr.suffix(1500))")
        }
        print("hostile configurations: seed \(seed): \(total) files; exit statuses \(outcomes.sorted { $0.key < $1.key })")
    }
}
