import FerryCore
import FerryTestSupport
import Foundation
import Synchronization
import Testing

/// Brokers that never answer, as a user meets them with a mistyped address:
/// no command waits without bound (librdkafka's default delivery timeout kept
/// `ferry enqueue` silent for 5 minutes), every refusal names the brokers and
/// the reason, and librdkafka's own lines go through Ferry's logger, so that
/// `--log-format json` is JSON and `--log-level` governs them.
@Suite struct UnreachableBrokerTests {
    let ferry = TestPaths.ferryBinary
    let credentials = ["AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b", "AWS_EC2_METADATA_DISABLED": "true"]

    /// A peer that takes connections and never answers them.
    final class SilentBroker: Sendable {
        private final class Held: Sendable { let fds = Mutex<[Int32]>([]) }
        private let held = Held()
        private let listener: LoopbackListener
        init() throws {
            let held = self.held
            listener = try LoopbackListener { fd in held.fds.withLock { $0.append(fd) } }
        }
        var port: Int { listener.port }
        deinit { held.fds.withLock { $0.forEach { close($0) } } }
    }

    /// Every sending command ends, with exit 1, within its delivery timeout:
    /// the command default (30 s) for `enqueue`, and `message.timeout.ms` when
    /// given, for each kind of absent broker: a closed port, a peer that never
    /// answers, a name that does not resolve.
    @Test func sendingCommandsGiveUpInBoundedTimeNamingBrokersAndReason() async throws {
        let closed = TestPaths.freePort()
        let silent = try SilentBroker()
        let brokers = ["127.0.0.1:\(closed)", "127.0.0.1:\(silent.port)", "nosuchhost.invalid:9092"]
        let quick = ["--kafka-property", "message.timeout.ms=2000"]
        var runs: [(arguments: [String], brokers: String, bound: Double)] = [
            (["enqueue", "delete", "--bucket", "bbb", "--key", "k", "--bootstrap-servers", brokers[0]], brokers[0], 60),
        ]
        for broker in brokers {
            runs.append((["pause", "job-1", "--bootstrap-servers", broker] + quick, broker, 25))
            runs.append((["items", "put", "--table", "posts:id", "--item", #"{"id":"p1"}"#, "--bootstrap-servers", broker] + quick, broker, 25))
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for run in runs {
                group.addTask { [ferry, credentials] in
                    let started = ContinuousClock.now
                    // Killed at 120 s: before the bound, enqueue took librdkafka's 300 s.
                    let result = try await runCommand(ferry, run.arguments, environment: credentials, timeout: 120)
                    let took = (ContinuousClock.now - started).inSeconds
                    let last = result.stderr.split(separator: "\n").last.map(String.init) ?? ""
                    #expect(result.status == 1, "\(run.arguments): exit \(result.status) after \(took) s: \(result.stderr.suffix(1500))")
                    #expect(took < run.bound, "\(run.arguments): \(took) s")
                    #expect(last.hasPrefix("Error: delivery to ") && last.contains("Message timed out"), "\(run.arguments): \(last)")
                    #expect(last.contains("brokers \(run.brokers)"), "\(run.arguments): \(last)")
                    if run.brokers == brokers[0] {
                        #expect(last.contains("Connection refused"), "\(run.arguments): the reason is named: \(last)")
                    }
                }
            }
            try await group.waitForAll()
        }
        withExtendedLifetime(silent) {}
    }

    /// Two workers given one state directory (the default `.ferry` of two
    /// started in one directory): the second stops at start, naming the
    /// first, before it touches the state or Kafka. The first waits on a
    /// broker that never answers, so it is still there.
    @Test func aSecondWorkerOnOneStateDirectoryIsRefused() async throws {
        let base = try TestPaths.temporaryDirectory("state-lock")
        defer { try? FileManager.default.removeItem(at: base) }
        let silent = try SilentBroker()
        let data = base.appendingPathComponent("data"), state = base.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        func arguments(_ id: String) -> [String] {
            WorkerCommandLine(bootstrapServers: "127.0.0.1:\(silent.port)", storage: .local(base.appendingPathComponent("store")),
                              dataRoot: data, stateDirectory: state, workerId: id).arguments
        }
        let first = try BackgroundProcess(name: "state-lock-first", executable: ferry, arguments: arguments("w-first"), environment: credentials, logDirectory: base)
        let lockFile = state.appendingPathComponent("ferry.lock").path
        #expect(await eventually(timeout: 30) { (try? String(contentsOfFile: lockFile, encoding: .utf8))?.contains("w-first") == true })
        let second = try await runCommand(ferry, arguments("w-second"), environment: credentials, timeout: 60)
        #expect(first.isRunning, "the first worker stopped: \(first.log.suffix(1500))")
        #expect(second.status == 1, "\(second.stderr.suffix(1500))")
        #expect(second.stderr.contains("state directory \(state.path) is in use by another worker (worker w-first, pid \(first.pid))"),
                "\(second.stderr.suffix(1500))")
        #expect(!FileManager.default.fileExists(atPath: state.appendingPathComponent("ferry.sqlite").path) || first.isRunning)
        _ = await first.stop(signal: SIGKILL)
        // Its lock died with it: the next worker on the directory starts (and holds it).
        let next = try BackgroundProcess(name: "state-lock-next", executable: ferry, arguments: arguments("w-next"), environment: credentials, logDirectory: base)
        #expect(await eventually(timeout: 30) { (try? String(contentsOfFile: lockFile, encoding: .utf8))?.contains("w-next") == true })
        _ = await next.stop(signal: SIGKILL)
    }

    /// A worker whose brokers refuse it, in `--log-format json`: every line
    /// it writes is a JSON log record (librdkafka's too, at their levels),
    /// the reason it stops is one of them, and only ArgumentParser's closing
    /// `Error:` line is text. `--log-level critical` leaves librdkafka's out.
    @Test func aWorkerInJSONModeWritesOnlyJSONAndHonoursTheLevel() async throws {
        let base = try TestPaths.temporaryDirectory("unreachable-broker")
        defer { try? FileManager.default.removeItem(at: base) }
        let broker = "127.0.0.1:\(TestPaths.freePort())"
        // The data root apart from the state dirs and the store, which the worker refuses inside it.
        let data = base.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        func worker(_ extra: [String]) async throws -> CommandResult {
            try await runCommand(ferry, WorkerCommandLine(bootstrapServers: broker, storage: .local(base.appendingPathComponent("store")),
                                                          dataRoot: data, stateDirectory: base.appendingPathComponent("state-\(UUID().uuidString)"),
                                                          extra: extra).arguments,
                                 environment: credentials, timeout: 120)
        }
        async let jsonRun = worker(["--log-format", "json"])
        async let quietRun = worker(["--log-level", "critical"])
        let (json, quiet) = try await (jsonRun, quietRun)

        #expect(json.status == 1, "\(json.stderr.suffix(1500))")
        var lines = (json.stdout + json.stderr).split(separator: "\n").map(String.init)
        let closing = lines.removeLast()
        #expect(closing.hasPrefix("Error: ") && closing.contains("Connection refused"), "\(closing)")
        let records = lines.map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        for (line, record) in zip(lines, records) {
            #expect(record?["level"] is String && record?["message"] is String, "not a JSON log record: \(line)")
        }
        let fromLibrdkafka = records.compactMap { $0 }.filter { ($0["message"] as? String)?.hasPrefix("librdkafka: ") == true }
        #expect(fromLibrdkafka.contains { $0["level"] as? String == "error" && ($0["message"] as? String)?.contains("Connection refused") == true },
                "\(lines.suffix(5))")
        #expect(records.compactMap { $0 }.contains { $0["level"] as? String == "critical" && ($0["message"] as? String)?.hasPrefix("stopped: ") == true },
                "\(lines.suffix(5))")

        #expect(quiet.status == 1)
        #expect(!quiet.stderr.contains("librdkafka: ") && !quiet.stderr.contains("%3|"), "\(quiet.stderr.prefix(1500))")
        #expect(quiet.stderr.contains("critical") && quiet.stderr.contains("stopped: "), "\(quiet.stderr.suffix(1500))")
    }
}
