import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// The crash-loop breaker of trigger delivery: an S3 event or stream record
/// whose handler kills every worker that takes it ends as one `WorkerCrashed`
/// record after `--max-starts` deaths, and the messages behind it are
/// delivered. Apart from `CrashLoopBreakerTests` (requests) so that the two
/// serialized suites, the test run's longest, run side by side.
@Suite(.serialized, .enabled(if: TestBuild.hasHooks, "needs the TestHooks trait: scripts/test.sh, or swift test --traits TestHooks"))
struct TriggerCrashLoopBreakerTests {
    let logger = Logger(label: "test.breaker.triggers")

    /// Starts trigger-breaker workers (every role, the trigger trap switched
    /// on for `marker`, a fresh state directory each: another pod) and
    /// replaces each that dies, until `done` or more than `maxStarts` deaths;
    /// returns the deaths and the worker still running.
    func superviseTriggers(_ env: EndToEndTests.Environment, moto: MotoServer, base: URL, marker: String, maxStarts: Int,
                           environment: [String: String] = [:],
                           done: () async throws -> Bool) async throws -> (deaths: Int, last: BackgroundProcess) {
        var started = 0
        func start() throws -> BackgroundProcess {
            started += 1
            return try triggerWorker(env, moto: moto, base: base, name: "trigger-breaker-\(started)", marker: marker,
                                     maxStarts: maxStarts, environment: environment)
        }
        var current = try start()
        var deaths = 0
        let deadline = Date().addingTimeInterval(240)
        while Date() < deadline, !(try await done()) {
            if !current.isRunning {
                deaths += 1
                #expect(current.log.contains("FERRY_TEST_TRIGGER_TRAP_MARKER matched"), "died for another reason:\n\(current.log.suffix(3000))")
                await current.stop()
                if deaths > maxStarts + 1 { break }
                current = try start()
            }
            try await Task.sleep(for: .milliseconds(500))
        }
        return (deaths, current)
    }

    /// Nine stream records on one partition, the fifth carrying `marker`; the keys of the other eight.
    func produceStreamRecords(_ env: EndToEndTests.Environment, marker: String) async throws -> Set<String> {
        let keys = (1...4).map { "public/s/before-\($0)" } + ["public/s/\(marker)"] + (1...4).map { "public/s/after-\($0)" }
        let records = keys.enumerated().map { n, key in
            HostileTriggerInputTests.streamRecord
                .replacingOccurrences(of: "public/incoming/a.jpg", with: key)
                .replacingOccurrences(of: "c4ca4238a0b923820dcc509a6f75849b", with: String(format: "%032x", n + 1))
        }
        try await env.kcat.produceMany(topic: "ferry.streams", records.map { (key: "objects/breaker", value: $0) })
        return Set(keys.filter { !$0.contains(marker) })
    }

    /// The keys the object-index trigger has indexed.
    func indexed(_ env: EndToEndTests.Environment) async throws -> Set<String> {
        let index = env.triggerOutput.appendingPathComponent("index/objects.sqlite").path
        guard FileManager.default.fileExists(atPath: index) else { return [] }
        let out = try await runCommand("/usr/bin/python3", ["-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print('\\n'.join(r[0] for r in c.execute('select key from objects')))", index])
        return Set(out.stdout.split(separator: "\n").map(String.init))
    }

    /// A worker whose trigger handlers trap on `marker`.
    func triggerWorker(_ env: EndToEndTests.Environment, moto: MotoServer, base: URL, name: String, marker: String, maxStarts: Int,
                       environment: [String: String] = [:]) throws -> BackgroundProcess {
        try WorkerCommandLine(bootstrapServers: env.cluster.bootstrapServers, storage: .s3(endpoint: moto.endpoint), dataRoot: env.dataRoot,
                              stateDirectory: base.appendingPathComponent("state-\(name)"), workerId: name, triggerOutput: env.triggerOutput,
                              extra: ["--max-starts", "\(maxStarts)"])
            .start(name: name, environment: moto.clientEnvironment.merging(["FERRY_TEST_TRIGGER_TRAP_MARKER": marker]) { $1 }.merging(environment) { $1 },
                   logDirectory: base)
    }

    /// The one record on `ferry.triggers.dlq`, with its condition; `records`
    /// says where each record is and which messages it carries.
    func onlyFailureRecord(_ env: EndToEndTests.Environment) async throws -> (count: Int, condition: String?, value: String?, records: String) {
        let dlq = try await env.kcat.consumeAll(topic: "ferry.triggers.dlq")
        func condition(_ value: String) -> String? {
            let record = try? JSONSerialization.jsonObject(with: Data(value.utf8)) as? [String: Any]
            return (record?["requestContext"] as? [String: Any])?["condition"] as? String
        }
        let records = dlq.map { "ferry.triggers.dlq/\($0.partition)@\($0.offset) \(condition($0.value) ?? "?"): \($0.value.prefix(600))" }
        return (dlq.count, dlq.first.flatMap { condition($0.value) }, dlq.first?.value, records.joined(separator: "\n"))
    }

    /// Removes a test's directory, or keeps it (and says where) when `passed` is false.
    func keepLogsUnless(_ passed: Bool, _ base: URL) {
        if passed { try? FileManager.default.removeItem(at: base) } else { print("worker logs kept in \(base.path)") }
    }

    /// Each trigger-breaker worker's lines about assignments and failure
    /// records, in start order: who wrote what, around which rebalance.
    func deliveryLines(_ base: URL) -> String {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: base.path)) ?? [])
            .filter { $0.hasPrefix("trigger-breaker-") && $0.hasSuffix(".log") }
            .sorted { $0.count != $1.count ? $0.count < $1.count : $0 < $1 }
        let wanted = ["partitions assigned", "partitions revoked", "not invoked", "failure destination", "failure record",
                      "commit failed", "were being handled", "TRAP_MARKER matched"]
        return names.map { name in
            let log = (try? String(contentsOf: base.appendingPathComponent(name), encoding: .utf8)) ?? ""
            let lines = log.split(separator: "\n").filter { line in wanted.contains { line.contains($0) } }
            return "== \(name)\n" + lines.joined(separator: "\n")
        }.joined(separator: "\n")
    }

    /// A trigger handler that traps on one event (a bug of a handler author:
    /// an index out of range, a `fatalError`) killed every worker that took
    /// the event, for ever, and with them the transfers of workers that have
    /// every role. Now the event is not invoked again after `--max-starts`
    /// deaths: one `WorkerCrashed` record on `ferry.triggers.dlq`, every
    /// event behind it delivered, and the upload requests that were in flight
    /// beside it at each death complete (the process-wide isolation gate runs
    /// suspects of both kinds alone, and settles every breaker's records
    /// first, so the deaths are not counted against them).
    @Test func aTriggerEventThatKillsItsWorkerIsDeadLetteredAndTheRestDelivered() async throws {
        try await MotoServer.start(logDirectory: try TestPaths.temporaryDirectory("breaker-trigger-moto")).stopAfter { moto in
            let base = try TestPaths.temporaryDirectory("breaker-trigger")
            let env = try EndToEndTests.Environment.oneBroker(base: base, server: moto, bucket: "breaker", logger: logger)
            try await Boto3(moto)("create-bucket", "breaker")
            let marker = "TTRAP-\(UUID().uuidString.prefix(8))"
            // One message key, so one partition of ferry.events: three events, the poison, five more.
            let keys = (1...3).map { "public/before-\($0).txt" } + ["public/\(marker).txt"] + (1...5).map { "public/after-\($0).txt" }
            try await env.kcat.produceMany(topic: "ferry.events",
                                           keys.map { (key: "breaker/events", value: HostileTriggerInputTests.event(key: $0)) })
            // Uploads beside them, on the requests topic: in flight or queued when the worker dies.
            let uploads = (1...6).map { "beside-\($0)" }
            try await env.kcat.produceMany(topic: "ferry.requests", uploads.map { id in
                (key: "breaker/\(id)", value: #"{"id":"\#(id)","op":"upload","bucket":"breaker","key":"\#(id).txt","source":"data:,ok"}"#)
            })
            let wanted = Set(keys.filter { !$0.contains(marker) })
            let (deaths, last) = try await superviseTriggers(env, moto: moto, base: base, marker: marker, maxStarts: 2) {
                let audited = Set(env.auditLines().compactMap { $0["key"] as? String })
                let done = try await env.statuses().filter { $0.state.isTerminal }.map(\.id)
                return wanted.isSubset(of: audited) && Set(uploads).isSubset(of: Set(done))
            }
            #expect(deaths == 2, "the poison event killed \(deaths) workers")
            let audited = env.auditLines().compactMap { $0["key"] as? String }
            #expect(wanted.isSubset(of: Set(audited)), "not delivered: \(wanted.subtracting(audited).sorted())\n\(last.log.suffix(3000))")
            #expect(!audited.contains { $0.contains(marker) })
            let failure = try await onlyFailureRecord(env)
            #expect(failure.count == 1 && failure.condition == "WorkerCrashed", "\(failure.records)\n\(deliveryLines(base))")
            #expect(failure.value?.contains(marker) == true, "the record carries the event")
            // The uploads beside it were not counted against: all completed, none dead-lettered.
            let statuses = try await env.statuses().filter { $0.state.isTerminal }
            for id in uploads {
                #expect(statuses.first { $0.id == id }?.state == .completed, "\(id): \(String(describing: statuses.first { $0.id == id }))")
            }
            #expect(try await env.kcat.consumeAll(topic: "ferry.requests.dlq").isEmpty)
            #expect(last.isRunning, "the last worker is up")
            await last.stop()
            print("trigger crash-loop breaker (events): \(deaths) deaths, then one WorkerCrashed record; 8 neighbouring events delivered, \(uploads.count) uploads completed")
            keepLogsUnless(failure.count == 1 && deaths == 2, base)
        }
    }

    /// The same for a stream trigger (object-index, batches of up to 100):
    /// after a death every record of the batch is a suspect and runs alone,
    /// so the deaths are counted against the record that causes them; the
    /// others are indexed, the poison ends as one `WorkerCrashed` record.
    @Test func aStreamRecordThatKillsItsWorkerIsDeadLetteredAndTheRestIndexed() async throws {
        try await MotoServer.start(logDirectory: try TestPaths.temporaryDirectory("breaker-stream-moto")).stopAfter { moto in
            let base = try TestPaths.temporaryDirectory("breaker-stream")
            let env = try EndToEndTests.Environment.oneBroker(base: base, server: moto, bucket: "breaker", logger: logger)
            let marker = "STRAP-\(UUID().uuidString.prefix(8))"
            let wanted = try await produceStreamRecords(env, marker: marker)
            let indexed = { try await self.indexed(env) }
            let (deaths, last) = try await superviseTriggers(env, moto: moto, base: base, marker: marker, maxStarts: 2) {
                wanted.isSubset(of: try await indexed())
            }
            #expect(deaths == 2, "the poison record killed \(deaths) workers")
            let found = try await indexed()
            #expect(wanted.isSubset(of: found), "not indexed: \(wanted.subtracting(found).sorted())\n\(last.log.suffix(3000))")
            #expect(!found.contains { $0.contains(marker) })
            let failure = try await onlyFailureRecord(env)
            #expect(failure.count == 1 && failure.condition == "WorkerCrashed", "\(failure.records)\n\(deliveryLines(base))")
            #expect(failure.value?.contains(marker) == true, "the record carries the stream record")
            #expect(last.isRunning, "the last worker is up")
            await last.stop()
            print("trigger crash-loop breaker (stream batches): \(deaths) deaths, then one WorkerCrashed record; \(wanted.count) neighbouring records indexed")
            keepLogsUnless(failure.count == 1 && deaths == 2, base)
        }
    }

    /// A `WorkerCrashed` record written while its partition was being
    /// revoked: the revocation's commit is refused (a broker holds a group's
    /// commits until every member rejoins; the embedded cluster refuses them
    /// while it waits), so the partition came back with its offset and start
    /// records as before the record, and the same worker wrote it again (one
    /// way to the duplicate seen once in a full run). The record is held here
    /// (a test hook) until a consumer of another topic joins the trigger's
    /// group, which moves every partition; the worker remembers the records
    /// it wrote and does not write one again.
    @Test func aStreamRecordDeadLetteredDuringARebalanceIsDeadLetteredOnce() async throws {
        try await MotoServer.start(logDirectory: try TestPaths.temporaryDirectory("breaker-rebalance-moto")).stopAfter { moto in
            let base = try TestPaths.temporaryDirectory("breaker-rebalance")
            let env = try EndToEndTests.Environment.oneBroker(base: base, server: moto, bucket: "breaker", logger: logger)
            let marker = "RTRAP-\(UUID().uuidString.prefix(8))"
            let wanted = try await produceStreamRecords(env, marker: marker)
            // The first WorkerCrashed record a worker writes waits until its partition begins to leave (30 s at most).
            let hold = ["FERRY_TEST_TRIGGER_QUARANTINE_HOLD": "30"]
            let holding = "FERRY_TEST_TRIGGER_QUARANTINE_HOLD: holding"
            var joiner: BackgroundProcess?
            let (deaths, last) = try await superviseTriggers(env, moto: moto, base: base, marker: marker, maxStarts: 2, environment: hold) {
                let logs = try FileManager.default.contentsOfDirectory(atPath: base.path).filter { $0.hasPrefix("trigger-breaker-") }
                    .map { (try? String(contentsOf: base.appendingPathComponent($0), encoding: .utf8)) ?? "" }
                if joiner == nil, logs.contains(where: { $0.contains(holding) }) {
                    // A member of object-index's group that takes none of its partitions: only the rebalance.
                    joiner = try BackgroundProcess(
                        name: "group-joiner", executable: "/usr/bin/kcat",
                        arguments: ["-b", env.cluster.bootstrapServers, "-G", "ferry-triggers.object-index", "-q",
                                    "-X", "partition.assignment.strategy=roundrobin", "ferry.control"],
                        logDirectory: base)
                }
                guard joiner != nil else { return false }
                return wanted.isSubset(of: try await indexed(env))
            }
            // A second record would be written before the records behind it are indexed; a margin all the same.
            try await Task.sleep(for: .seconds(3))
            #expect(deaths == 2, "the poison record killed \(deaths) workers")
            let found = try await indexed(env)
            #expect(wanted.isSubset(of: found), "not indexed: \(wanted.subtracting(found).sorted())\n\(last.log.suffix(3000))")
            // The race was there: the holder's stream partitions were revoked while it held the record.
            let log = last.log
            let held = log.range(of: holding), revoked = log.range(of: "trigger=object-index [FerryKafka] partitions revoked")
            let released = log.range(of: "offset 4 (revoked)")
            #expect(held != nil && revoked != nil && released != nil
                    && held!.upperBound <= revoked!.lowerBound && revoked!.upperBound <= released!.lowerBound,
                    "no revocation while the record was held:\n\(log.suffix(6000))")
            let failure = try await onlyFailureRecord(env)
            #expect(failure.count == 1 && failure.condition == "WorkerCrashed", "\(failure.records)\n\(deliveryLines(base))")
            #expect(log.contains("sent to its failure destination by this worker before its partition moved uncommitted; not sent again"),
                    "the partition did not come back uncommitted (the case this test is for):\n\(log.suffix(6000))")
            #expect(last.isRunning, "the worker is up")
            #expect(!log.contains("the broker does not keep offset commit metadata"), "the embedded cluster keeps start records")
            await joiner?.stop()
            await last.stop()
            print("trigger crash-loop breaker (rebalance during the record): \(failure.count) WorkerCrashed record(s)")
            try? FileManager.default.removeItem(at: base)
        }
    }
}
