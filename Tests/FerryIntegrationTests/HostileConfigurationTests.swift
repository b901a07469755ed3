import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// A configuration file is an operator's input, and gets the same guarantee
/// as a request: `ferry config check` (which validates exactly what
/// `ferry worker` would start with) answers every generated variant of a
/// complete file — JSON is YAML, so `HostileJSON` makes them — with exit 0,
/// or 64 and a reason on stderr; never a trap, another status, or no answer
/// (a 400,000-character value took minutes to echo, so `runCommand`'s 60 s
/// cut it off, until the error line was clipped and its escaping linear).
///
/// Each `ferry` runs in the test's temporary directory: a variant's relative
/// state directory (`" padded "`, `...`) is made there, not in the checkout
/// (two such `ferry.lock` files had been committed).
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

    /// Every other variant starts from the file without `s3.endpoint`, so that
    /// values reach the AWS paths too (the region becomes a host name there).
    static func everyOther(_ index: Int, _ file: String) -> String {
        index % 2 == 0 ? file : file.replacingOccurrences(of: #""endpoint":"http://127.0.0.1:9000","#, with: "")
    }

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
        let first = try await runCommand(TestPaths.ferryBinary, ["config", "check", "--config", path.path], environment: environment, timeout: 60,
                                         workingDirectory: base)
        try #require(first.status == 0, "the file the variants start from is valid: \(first.stderr)")

        var rng = HostileInput.rng(seed: seed)
        var outcomes: [Int32: Int] = [:]
        for index in 0..<total {
            let variant = HostileJSON.variant(of: Self.everyOther(index, valid), &rng)
            try Data(variant.bytes).write(to: path)
            let result = try await runCommand(TestPaths.ferryBinary, ["config", "check", "--config", path.path], environment: environment, timeout: 60,
                                         workingDirectory: base)
            outcomes[result.status, default: 0] += 1
            #expect(result.status == 0 || result.status == 64,
                    "seed \(seed), file \(index): exit \(result.status): \(result.stderr.suffix(1500)) from \(variant)")
            if result.status == 64 {
                #expect(!result.stderr.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "seed \(seed), file \(index): refused without a reason")
            }
            #expect(!result.stderr.contains("Fatal error"), "seed \(seed), file \(index): a trap: \(result.stderr.suffix(1500))")
            // A refused value is clipped, not echoed: the variants hold strings of 400,000 characters.
            #expect(result.stderr.utf8.count <= 32_768, "seed \(seed), file \(index): \(result.stderr.utf8.count) bytes on stderr")
        }
        print("hostile configurations: seed \(seed): \(total) files; exit statuses \(outcomes.sorted { $0.key < $1.key })")
    }

    /// Without `s3.endpoint` the region becomes part of the AWS host name (and
    /// it is always part of the signing scope): a region with a space trapped
    /// `config check` and the worker (SIGILL, exit 132). Generated regions, in a
    /// file without an endpoint: exit 0 exactly when `RegionRule` takes them,
    /// else 64 with the reason.
    @Test func everyRegionIsTakenOrRefusedWithAReason() async throws {
        let seed = FuzzReplay.seed
        print("hostile regions: seed \(seed) (replay with FERRY_FUZZ_SEED=\(seed))")
        let base = try TestPaths.temporaryDirectory("fuzz-region")
        defer { try? FileManager.default.removeItem(at: base) }
        // The default state directory (.ferry, relative) is made in the working directory, beside the data root.
        let data = base.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        var rng = HostileInput.rng(seed: seed)
        let plausible = ["us-east-1", "eu-central-003", "auto", "fr-par", "default", "US_WEST", "nyc3", "a.b", String(repeating: "r", count: 64)]
        var regions = plausible + ["", " ", "us east", "us-east-1/", "a/b", "a?b", "[", "a#b", "a:b@c", String(repeating: "r", count: 65)]
        for _ in 0..<30 {
            regions.append((0..<Int.random(in: 1...3, using: &rng)).map { _ in
                Bool.random(using: &rng) ? plausible.randomElement(using: &rng)! : HostileInput.pieces.randomElement(using: &rng)!
            }.joined())
        }
        let environment = ["AWS_ACCESS_KEY_ID": "fuzz", "AWS_SECRET_ACCESS_KEY": "fuzz", "AWS_EC2_METADATA_DISABLED": "true"]
        for (index, region) in regions.enumerated() {
            let path = base.appendingPathComponent("region-\(index).yaml")
            try Data("""
                {"worker":{"dataRoot":\(HostileInput.jsonString(data.path))},"kafka":{"bootstrapServers":"127.0.0.1:9092"},
                 "s3":{"region":\(HostileInput.jsonString(region))}}
                """.utf8).write(to: path)
            let result = try await runCommand(TestPaths.ferryBinary, ["config", "check", "--config", path.path], environment: environment, timeout: 60,
                                         workingDirectory: base)
            let expected: Int32 = RegionRule.violation(of: region) == nil ? 0 : 64
            #expect(result.status == expected, "region \(region.debugDescription): exit \(result.status): \(result.stderr.suffix(800))")
            #expect(!result.stderr.contains("Fatal error"), "region \(region.debugDescription): a trap")
            if expected == 64 { #expect(result.stderr.contains("region"), "\(result.stderr.suffix(800))") }
        }
    }

    /// Invariant: `ferry config check` and `ferry worker` give every file the
    /// same verdict: 64 from both, or from neither (the worker then gets as far
    /// as Kafka, where its log says `configuration accepted`). They disagreed
    /// on log settings, the HTTP address and unusable state directories,
    /// which the worker found only after joining Kafka. One file at a time,
    /// each variant with a state directory of its own.
    @Test func configCheckAndTheWorkerAgreeOnEveryFile() async throws {
        let seed = FuzzReplay.seed, total = max(1, FuzzReplay.messages(default: 100) * 2 / 5)
        print("config check against the worker: seed \(seed), \(total) files (replay with FERRY_FUZZ_SEED=\(seed) FERRY_FUZZ_MESSAGES=\(total * 5 / 2))")
        let base = try TestPaths.temporaryDirectory("fuzz-config-agree")
        defer { try? FileManager.default.removeItem(at: base) }
        try FileManager.default.createDirectory(at: base.appendingPathComponent("data"), withIntermediateDirectories: true)
        // Nothing listens at the file's brokers: a worker that accepts its file stops at Kafka.
        let file = Self.file.replacingOccurrences(of: "127.0.0.1:9092", with: "127.0.0.1:\(TestPaths.freePort())")
        let environment = ["AWS_ACCESS_KEY_ID": "fuzz", "AWS_SECRET_ACCESS_KEY": "fuzz", "AWS_EC2_METADATA_DISABLED": "true"]
        var rng = HostileInput.rng(seed: seed)
        var verdicts: [String: Int] = [:]
        for index in 0..<total {
            let valid = file.replacingOccurrences(of: "DATA", with: base.appendingPathComponent("data").path)
                .replacingOccurrences(of: "STATE", with: base.appendingPathComponent("state-\(index)").path)
            // The first is the valid file itself: both must accept it.
            var bytes = Array(valid.utf8), variant = "the file itself"
            if index > 0 {
                let mutated = HostileJSON.variant(of: Self.everyOther(index, valid), &rng)
                (bytes, variant) = (mutated.bytes, mutated.description)
            }
            let path = base.appendingPathComponent("worker-\(index).yaml")
            try Data(bytes).write(to: path)
            let check = try await runCommand(TestPaths.ferryBinary, ["config", "check", "--config", path.path], environment: environment, timeout: 60,
                                         workingDirectory: base)
            let worker = try BackgroundProcess(name: "worker-\(index)", executable: TestPaths.ferryBinary, arguments: ["worker", "--config", path.path],
                                               environment: environment, logDirectory: base, workingDirectory: base)
            let decided = await eventually(timeout: 60, every: 0.05) { !worker.isRunning || worker.log.contains("configuration accepted") }
            let log = worker.log
            let status = await worker.stop(signal: SIGKILL, timeout: 5)
            let workerRefused = !log.contains("configuration accepted") && status == 64
            #expect(check.status == 0 || check.status == 64, "seed \(seed), file \(index): config check exit \(check.status): \(check.stderr.suffix(600)); file \(variant)")
            #expect(decided, "seed \(seed), file \(index): the worker neither refused nor accepted it in 60 s: \(log.suffix(1500)); config check exit \(check.status); file \(variant)")
            #expect((check.status == 64) == workerRefused,
                    "seed \(seed), file \(index): config check exit \(check.status), worker \(workerRefused ? "refused" : "accepted") it: check said \(check.stderr.suffix(600)); worker said \(log.suffix(1200)); file \(variant)")
            verdicts["\(check.status == 64 ? "refused" : "accepted") by both", default: 0] += (check.status == 64) == workerRefused ? 1 : 0
        }
        print("config check against the worker: seed \(seed): \(total) files; \(verdicts.sorted { $0.key < $1.key })")
    }
}
