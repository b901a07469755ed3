import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// A command line is a user's input, and gets the guarantee a request gets:
/// every generated command line of the commands that reach storage or Kafka
/// with user values (`cp` both ways, `presign`, `uploads`, `enqueue`, `status`,
/// `pause`) ends by itself with 0, 1 or 64 — 64 and 1 with a reason on stderr
/// — never a trap, another status or no answer; and what it prints holds no
/// control character or bidirectional override but its newlines (a key it was
/// given cannot drive the user's terminal or reorder what it shows).
/// Storage is moto; Kafka is a closed port (a send gives up after 1.5 s).
///
/// `FERRY_FUZZ_SEED` replays a run; `FERRY_FUZZ_MESSAGES` sets its size (default 80).
@Suite struct HostileCommandLineTests {
    /// A value for a flag: a hostile key-like string, a number past a boundary, or a plausible one.
    static func value(_ rng: inout some RandomNumberGenerator) -> String {
        let raw: String
        switch Int.random(in: 0..<10, using: &rng) {
        case 6...9: raw = ["a.txt", "photos/cat.jpg", "t-1", "100", "8MiB", "CRC32C", "public/x", "image/png", "k=v"].randomElement(using: &rng)!
        case 0: raw = HostileInput.numberLiterals.randomElement(using: &rng)!
        case 1: raw = HostileInput.headerValue(&rng)
        case 2: raw = ["0", "-1", "1", "3600", "604801", "nan", "inf", "1e309", "9223372036854775808", "5MiB", "0x10", ""].randomElement(using: &rng)!
        default: raw = HostileInput.key(&rng)
        }
        // argv cannot hold NUL (no shell passes one either).
        return raw.replacingOccurrences(of: "\u{0}", with: "")
    }

    static func s3URI(_ rng: inout some RandomNumberGenerator) -> String {
        let bucket = ["fuzz", "fuzz", "fuzz", "Fuzz", "", "no-such-bucket", "a..b", "x"].randomElement(using: &rng)!
        return "s3://\(bucket)/" + value(&rng)
    }

    static func commandLine(_ rng: inout some RandomNumberGenerator, file: String, dir: String) -> [String] {
        var line: [String]
        var optional: [[String]]
        // Weighted to the commands that work fast: `status` waits about 10 s for a closed broker.
        switch Int.random(in: 0..<13, using: &rng) {
        case 0...2:
            line = ["cp", file, s3URI(&rng)]
            optional = [["--content-type", value(&rng)], ["--metadata", value(&rng) + "=" + value(&rng)], ["--part-size", value(&rng)],
                        ["--checksum", value(&rng)], ["--max-transfers", value(&rng)]]
        case 3...4:
            line = ["cp", s3URI(&rng), Bool.random(using: &rng) ? dir + "/" : dir + "/" + value(&rng)]
            optional = [["--recursive"], ["--part-concurrency", value(&rng)], ["--fsync"]]
        case 5...6:
            line = ["presign", ["get", "put", "delete", value(&rng)].randomElement(using: &rng)!, s3URI(&rng)]
            optional = [["--expires", value(&rng)], ["--content-type", value(&rng)]]
        case 7...8:
            line = ["uploads", s3URI(&rng)]
            optional = [["--abort"], ["--upload-id", value(&rng)], ["--older-than", value(&rng)]]
        case 9...10:
            line = ["enqueue", ["upload", "download", "delete", "copy", "delete", value(&rng)].randomElement(using: &rng)!,
                    "--bucket", Bool.random(using: &rng) ? "photos" : value(&rng), "--key", value(&rng)]
            optional = [["--source", value(&rng)], ["--destination", value(&rng)], ["--id", value(&rng)], ["--access-level", value(&rng)],
                        ["--identity-id", value(&rng)], ["--metadata", value(&rng)], ["--callback", value(&rng)], ["--part-size", value(&rng)],
                        ["--retry-limit", value(&rng)], ["--transfer-timeout", value(&rng)], ["--checksum", value(&rng)], ["--timeout", value(&rng)]]
        case 11 where Bool.random(using: &rng):
            line = ["status", value(&rng)]
            optional = [["--json"]]
        default:
            line = [["pause", "resume", "cancel"].randomElement(using: &rng)!, value(&rng)]
            optional = []
        }
        // Fewer options for enqueue: with each one a likely refusal, few lines would reach the send.
        for option in optional where Int.random(in: 0..<(line[0] == "enqueue" ? 5 : 2), using: &rng) == 0 { line += option }
        if ["enqueue", "status", "pause", "resume", "cancel"].contains(line[0]) {
            line += ["--bootstrap-servers", "127.0.0.1:1", "--kafka-property", "message.timeout.ms=1500"]
        }
        return line
    }

    @Test func everyCommandLineEndsWithAnOutcomeAndAReason() async throws {
        let seed = FuzzReplay.seed, total = FuzzReplay.messages(default: 80)
        print("hostile command lines: seed \(seed), \(total) lines (replay with FERRY_FUZZ_SEED=\(seed) FERRY_FUZZ_MESSAGES=\(total))")
        let base = try TestPaths.temporaryDirectory("fuzz-cli")
        defer { try? FileManager.default.removeItem(at: base) }
        try await MotoServer.start(logDirectory: base).stopAfter { moto in
            _ = try await runChecked("python3", ["-c", "import boto3; boto3.client('s3').create_bucket(Bucket='fuzz')"],
                                     environment: moto.clientEnvironment)
            let file = base.appendingPathComponent("in.txt")
            try Data("hostile command lines\n".utf8).write(to: file)
            let dir = base.appendingPathComponent("out")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)

            var rng = HostileInput.rng(seed: seed)
            var outcomes: [String: Int] = [:]
            var seconds: [String: Double] = [:]
            for index in 0..<total {
                let line = Self.commandLine(&rng, file: file.path, dir: dir.path)
                let what = "seed \(seed), line \(index): ferry \(line.map(\.debugDescription).joined(separator: " "))"
                let started = ContinuousClock.now
                let result = try await runCommand(TestPaths.ferryBinary, line, environment: moto.clientEnvironment, timeout: 60)
                outcomes["\(line[0]) \(result.status)", default: 0] += 1
                let took = ContinuousClock.now - started
                seconds[line[0], default: 0] += Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18
                #expect([0, 1, 64].contains(result.status), "\(what): exit \(result.status) after \(ContinuousClock.now - started): \(result.stderr.suffix(1500))")
                if result.status != 0 {
                    #expect(!result.stderr.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(what): exit \(result.status) without a reason")
                }
                #expect(!result.stderr.contains("Fatal error"), "\(what): a trap: \(result.stderr.suffix(1500))")
                let unsafe = (result.stdout + result.stderr).unicodeScalars.filter { $0 != "\n" && TerminalText.isUnsafe($0) }
                #expect(unsafe.isEmpty, "\(what): printed \(unsafe.map { "U+" + String($0.value, radix: 16) }) in \((result.stdout + result.stderr).debugDescription.suffix(1500))")
            }
            print("hostile command lines: seed \(seed): \(total) lines; outcomes \(outcomes.sorted { $0.key < $1.key }); "
                  + "seconds \(seconds.sorted { $0.key < $1.key }.map { "\($0.key) \(String(format: "%.1f", $0.value))" })")
        }
    }
}
