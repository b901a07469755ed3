import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// A message that kills every worker that takes it ends as one `PoisonMessage`
/// dead letter after at most `--max-starts` deaths, and the requests behind it
/// in its partition complete. The trap is switched on for these workers only
/// (`FERRY_TEST_TRAP_MARKER`, a test hook), so it stands for any bug a message
/// could hit.
@Suite(.serialized, .enabled(if: TestBuild.hasHooks, "needs the TestHooks trait: scripts/test.sh, or swift test --traits TestHooks"))
struct CrashLoopBreakerTests {
    let logger = Logger(label: "test.breaker")

    /// Runs a "supervisor": whenever the worker dies, a new one is started,
    /// with a fresh state directory when `freshState` (a pod that comes back
    /// empty, or another machine) or the same one (a restarted process).
    enum Fault { case trap, hang }

    /// `rebalanceDuringDeadLetter`: the dead letter is held (a test hook) until a
    /// consumer of another topic joins the workers' group, which (assignment made
    /// eager) moves every partition while it is written.
    func supervise(freshState: Bool, maxStarts: Int, fault: Fault = .trap, widenSettling: Bool = false,
                   rebalanceDuringDeadLetter: Bool = false) async throws {
        try await MotoServer.start(logDirectory: try TestPaths.temporaryDirectory("breaker-moto")).stopAfter { moto in
            let base = try TestPaths.temporaryDirectory("breaker-\(freshState ? "fresh" : "same")")
            let env = try EndToEndTests.Environment.oneBroker(base: base, server: moto, bucket: "breaker", logger: logger)
            try await Boto3(moto)("create-bucket", "breaker")
            let marker = "TRAP-\(UUID().uuidString.prefix(8))"
            // A trap, or a hang the check watchdog (shortened to 3 s here) turns into an exit.
            var faultEnvironment = fault == .trap ? ["FERRY_TEST_TRAP_MARKER": marker]
                : ["FERRY_TEST_HANG_MARKER": marker, "FERRY_TEST_CHECK_LIMIT_SECONDS": "3"]
            // A neighbour whose outcome came just before the poison ran: its start record
            // must be settled before the poison's start is committed, or the next worker
            // counts it as started once more and quarantines it with the poison. The delay
            // makes that window wide (a full run lost after-1 that way once without it).
            if widenSettling { faultEnvironment["FERRY_TEST_SETTLE_DELAY_MS"] = "300" }
            if rebalanceDuringDeadLetter { faultEnvironment["FERRY_TEST_DEAD_LETTER_HOLD"] = "30" }
            let deathSign = fault == .trap ? "FERRY_TEST_TRAP_MARKER matched" : "stuck where nothing can stop them"
            var workers: [BackgroundProcess] = []
            func start() throws -> BackgroundProcess {
                let n = workers.count
                let worker = try WorkerCommandLine(
                    bootstrapServers: env.cluster.bootstrapServers, storage: .s3(endpoint: moto.endpoint), dataRoot: env.dataRoot,
                    stateDirectory: base.appendingPathComponent(freshState ? "state-\(n)" : "state"), workerId: "breaker-\(n)",
                    extra: ["--max-starts", "\(maxStarts)"]
                        + (rebalanceDuringDeadLetter ? ["--kafka-property", "partition.assignment.strategy=roundrobin"] : []))
                    .start(name: "breaker-worker-\(n)", environment: moto.clientEnvironment.merging(faultEnvironment) { $1 }, logDirectory: base)
                workers.append(worker)
                return worker
            }
            // One key, so one partition: three requests, the poison, five more.
            func upload(_ id: String, _ note: String = "ok") -> String {
                #"{"id":"\#(id)","op":"upload","bucket":"breaker","key":"\#(id).txt","source":"data:,\#(note)"}"#
            }
            var batch = (1...3).map { (key: "breaker/one", value: upload("before-\($0)")) }
            batch.append((key: "breaker/one", value: upload("poison", marker)))
            batch += (1...5).map { (key: "breaker/one", value: upload("after-\($0)")) }
            try await env.kcat.produceMany(topic: "ferry.requests", batch)

            var current = try start()
            var deaths = 0
            var joiner: BackgroundProcess?
            let deadline = Date().addingTimeInterval(240)
            while Date() < deadline {
                if rebalanceDuringDeadLetter, joiner == nil, current.log.contains("FERRY_TEST_DEAD_LETTER_HOLD: holding") {
                    // A member of the workers' group that takes none of its partitions: only the rebalance.
                    joiner = try BackgroundProcess(
                        name: "group-joiner", executable: "/usr/bin/kcat",
                        arguments: ["-b", env.cluster.bootstrapServers, "-G", "ferry-workers", "-q",
                                    "-X", "partition.assignment.strategy=roundrobin", "ferry.control"],
                        logDirectory: base)
                }
                let done = try await env.statuses().filter { $0.state.isTerminal }
                // Every request's terminal status, those before the poison too: a restarted
                // worker may redo them alongside the later ones and publish theirs last.
                let ids = ["poison"] + (1...3).map { "before-\($0)" } + (1...5).map { "after-\($0)" }
                if ids.allSatisfy({ id in done.contains { $0.id == id } }) { break }
                if !current.isRunning {
                    deaths += 1
                    #expect(current.log.contains(deathSign), "died for another reason:\n\(current.log.suffix(3000))")
                    await current.stop()
                    #expect(deaths <= maxStarts, "more deaths than --max-starts")
                    if deaths > maxStarts + 1 { break }
                    current = try start()
                }
                try await Task.sleep(for: .milliseconds(500))
            }
            #expect(deaths == maxStarts, "the poison killed \(deaths) workers")
            let statuses = try await env.statuses().filter { $0.state.isTerminal }
            for id in (1...3).map({ "before-\($0)" }) + (1...5).map({ "after-\($0)" }) {
                #expect(statuses.first { $0.id == id }?.state == .completed, "\(id) did not complete\n\(current.log.suffix(3000))")
            }
            let poison = statuses.first { $0.id == "poison" }
            #expect(poison?.state == .rejected && poison?.error?.code == "PoisonMessage", "\(String(describing: poison))")
            let dlq = try await env.kcat.consumeAll(topic: "ferry.requests.dlq")
            #expect(dlq.count == 1, "\(dlq.map(\.headers))")
            #expect(dlq.first?.value == upload("poison", marker), "the dead letter carries the original bytes")
            #expect(dlq.first?.headers.contains("ferry-error-code=PoisonMessage") == true)
            #expect(dlq.first?.headers.contains("ferry-starts=\(maxStarts)") == true, "\(dlq.first?.headers ?? "")")
            #expect(current.isRunning, "the last worker is up")
            if rebalanceDuringDeadLetter {
                // The race was there, and the partition came back to the worker that wrote the dead letter.
                #expect(current.log.contains("offset 3 (revoked)"), "no revocation while the dead letter was held:\n\(current.log.suffix(6000))")
                #expect(current.log.contains("was dead-lettered by this worker before its partition moved uncommitted; not dead-lettered again"),
                        "the partition did not come back uncommitted (the case this run is for):\n\(current.log.suffix(6000))")
                // The joiner's leaving is one more rebalance, whose commits the embedded cluster refuses: the
                // worker commits past the poison once it has its partitions again (else `late` below finds it).
                let assigned = { current.log.components(separatedBy: "[FerryKafka] partitions assigned: ferry.requests").count }
                let before = assigned()
                await joiner?.stop()
                #expect(await eventually(timeout: 60, every: 0.5) { assigned() > before }, "no rebalance after the joiner left")
                try await Task.sleep(for: .seconds(3))
            }
            // Committed past it: a new worker with empty state sees none of it again.
            await current.stop()
            let late = try start()
            try await env.kcat.produce(topic: "ferry.requests", key: "breaker/one", value: upload("late"))
            #expect(try await env.terminalStatus(of: "late", timeout: 60)?.state == .completed)
            #expect(try await env.kcat.consumeAll(topic: "ferry.requests.dlq").count == 1)
            #expect(!late.log.contains(deathSign))
            await late.stop()
            print("crash-loop breaker (\(fault), \(freshState ? "fresh state each time" : "same state dir")): \(deaths) deaths, then one PoisonMessage dead letter; 8 neighbours completed")
            try? FileManager.default.removeItem(at: base)
        }
    }

    /// Each replacement worker starts with nothing: the count travels in the
    /// committed offset's metadata (what holds across a fleet of pods).
    @Test func poisonIsQuarantinedAcrossWorkersThatNeverSawTheCrash() async throws {
        try await supervise(freshState: true, maxStarts: 2, widenSettling: true)
    }

    /// The same worker restarted with its state directory.
    @Test func poisonIsQuarantinedByARestartedWorker() async throws {
        try await supervise(freshState: false, maxStarts: 3)
    }

    /// A dead letter written while its partition was being revoked: the
    /// revocation's commit is refused (the embedded cluster refuses every
    /// commit while its group rebalances), the partition came back with the
    /// same start records, and the same worker dead-lettered it again (as
    /// `WorkerCrashed` records could be, `TriggerCrashLoopBreakerTests`). It remembers what it
    /// dead-lettered now: one dead letter.
    @Test func aPoisonMessageDeadLetteredDuringARebalanceIsDeadLetteredOnce() async throws {
        try await supervise(freshState: true, maxStarts: 2, rebalanceDuringDeadLetter: true)
    }

    /// A message that wedges its worker in synchronous code (no crash, nothing
    /// to cancel) is ended by the check watchdog and quarantined the same way.
    @Test func aHangingMessageIsQuarantinedToo() async throws {
        try await supervise(freshState: true, maxStarts: 2, fault: .hang)
    }
}
