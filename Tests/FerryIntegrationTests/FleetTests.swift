import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// Fleet semantics with real processes: a mock Kafka cluster in this process,
/// Ceph's RADOS Gateway (it checks signatures), several `ferry worker`
/// processes killed with SIGKILL at will. Nothing may be lost or corrupt, and
/// each request's visible effect must happen once.
@Suite(.serialized, .enabled(if: CephGateway.isInstalled || ProcessInfo.processInfo.environment["CI"] != nil))
struct FleetTests {
    let logger = Logger(label: "test.fleet")

    func withFleet(_ label: String, proxy: Bool = false,
                   _ body: (EndToEndTests.Environment, FaultProxy?) async throws -> Void) async throws {
        let rgw = try await CephGateway.start()
        let base = try TestPaths.temporaryDirectory("fleet-\(label)")
        var faultProxy: FaultProxy?
        do {
            let cluster = try EmbeddedKafkaCluster(brokers: 3, logger: logger)
            for topic in Topics().all { try cluster.createTopic(topic, partitions: 4) }
            let dataRoot = base.appendingPathComponent("data")
            try FileManager.default.createDirectory(at: dataRoot, withIntermediateDirectories: true)
            var server: any S3TestServer = rgw
            if proxy {
                let p = try await FaultProxy.start(upstream: rgw.endpoint, rate: 0, logRequests: true, in: base)
                faultProxy = p
                server = ProxiedServer(base: rgw, endpoint: p.endpoint)
            }
            let env = EndToEndTests.Environment(cluster: cluster, kcat: Kcat(bootstrapServers: cluster.bootstrapServers),
                                                dataRoot: dataRoot, logs: base, server: server, bucket: "fleet")
            try await Boto3(rgw)("create-bucket", "fleet")
            try await body(env, faultProxy)
        } catch {
            await faultProxy?.process.stop()
            await rgw.stop()
            throw error
        }
        await faultProxy?.process.stop()
        await rgw.stop()
        // FERRY_KEEP_TEST_LOGS keeps the workers' logs and state for a look after a failure.
        if ProcessInfo.processInfo.environment["FERRY_KEEP_TEST_LOGS"] == nil {
            try? FileManager.default.removeItem(at: base)
        } else {
            print("fleet test files kept in \(base.path)")
        }
    }

    /// Writes `size` pseudo-random bytes (seeded by `seed`) to `url`.
    func writeSource(_ url: URL, size: Int, seed: UInt64) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        var bytes = Data(count: size)
        bytes.withUnsafeMutableBytes { raw in
            var x = seed | 1
            for i in 0..<raw.count { x = x &* 6364136223846793005 &+ 1442695040888963407; raw[i] = UInt8(truncatingIfNeeded: x >> 33) }
        }
        try bytes.write(to: url)
    }

    func sha256(_ files: [URL]) async throws -> [String: String] {
        let out = try await runChecked("sha256sum", files.map(\.path))
        var result: [String: String] = [:]
        for line in out.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1)
            result[String(parts[1]).trimmingCharacters(in: .whitespaces)] = String(parts[0])
        }
        return result
    }

    func terminalStatuses(_ env: EndToEndTests.Environment) async throws -> [String: [TransferStatus]] {
        Dictionary(grouping: try await env.statuses().filter { $0.state.isTerminal }, by: \.id)
    }

    func count(_ needle: String, in workers: [BackgroundProcess]) -> Int {
        workers.reduce(0) { $0 + $1.log.components(separatedBy: needle).count - 1 }
    }

    /// 200 mixed requests on three workers; one worker is SIGKILLed twice and restarted.
    @Test func twoHundredRequestsSurviveTwoKills() async throws {
        try await withFleet("kill9") { env, _ in
            let total = 200, large = 20
            var files: [URL] = []
            var messages: [(key: String, value: String)] = []
            for i in 0..<total {
                let isLarge = i % (total / large) == 0
                let file = env.dataRoot.appendingPathComponent("in/f-\(i).bin")
                try writeSource(file, size: isLarge ? 12 << 20 : 1_000 + (i * 7_919) % 300_000, seed: UInt64(i + 1))
                files.append(file)
                let key = "fleet/f-\(i).bin"
                messages.append(("fleet/\(key)", """
                    {"id":"fleet-\(i)","op":"upload","bucket":"fleet","key":"\(key)","source":"\(file.absoluteString)"}
                    """))
            }
            let expected = try await sha256(files)
            // Small parts and a bandwidth cap, so the kills land while uploads are in flight.
            let flags = ["--multipart-threshold", "8MiB", "--part-size", "5MiB", "--bandwidth-limit", "12MiB", "--max-transfers", "6"]
            var incarnations: [BackgroundProcess] = []
            func start(_ name: String, state: String) throws -> BackgroundProcess {
                let w = try env.startWorker(name: name, stateDir: state, extra: flags)
                incarnations.append(w)
                return w
            }
            var victim = try start("w1-a", state: "state-1")
            let others = [try start("w2", state: "state-2"), try start("w3", state: "state-3")]
            try await env.kcat.produceMany(topic: "ferry.requests", messages)

            var kills = 0
            for (threshold, next) in [(50, "w1-b"), (120, "w1-c")] {
                #expect(try await eventually(timeout: 180, every: 1) { try await terminalStatuses(env).count >= threshold })
                #expect(await victim.stop(signal: SIGKILL, timeout: 5) == 137 || !victim.isRunning)
                kills += 1
                try await Task.sleep(for: .seconds(1))
                victim = try start(next, state: "state-1")
            }
            let allDone = try await eventually(timeout: 300, every: 1) { try await terminalStatuses(env).count >= total }
            let terminal = try await terminalStatuses(env)
            #expect(allDone, "\(terminal.count) of \(total) finished; victim log:\n\(victim.log.suffix(3000))")

            // Every request: one outcome, completed (repeats of it are the same status, answered from the finished set).
            var repeatedStatuses = 0
            for i in 0..<total {
                let statuses = terminal["fleet-\(i)"] ?? []
                #expect(Set(statuses.map(\.state)) == [.completed], "fleet-\(i): \(statuses.map(\.state))")
                #expect(Set(statuses.compactMap(\.object?.eTag)).count == 1, "fleet-\(i): differing outcomes")
                repeatedStatuses += max(0, statuses.count - 1)
            }
            // Every object byte-exact, read back by boto3.
            let stored = try JSONDecoder().decode([String: String].self,
                                                  from: Data(try await Boto3(env.server)("sha256-all", "fleet", "public/fleet/").utf8))
            #expect(stored.count == total)
            for (i, file) in files.enumerated() {
                #expect(stored["public/fleet/f-\(i).bin"] == expected[file.path], "f-\(i).bin differs")
            }
            // The audit trigger: one effect per object once deduplicated by event identity. Triggers
            // run after the outcome is published (their own consumer group), so they may still be catching up.
            var audit: [[String: Any]] = []
            var identities: [String: Set<String>] = [:]
            let triggersDone = await eventually(timeout: 120, every: 1) {
                audit = env.auditLines().filter { ($0["key"] as? String)?.hasPrefix("public/fleet/") == true }
                identities = Dictionary(grouping: audit) { $0["key"] as? String ?? "" }
                    .mapValues { Set($0.compactMap { $0["sequencer"] as? String }) }
                return identities.count >= total
            }
            #expect(triggersDone && identities.count == total, "\(identities.count) objects seen by the trigger")
            #expect(identities.values.allSatisfy { $0.count == 1 }, "an object had two distinct events")
            // No multipart upload with parts left behind: interrupted ones were
            // resumed, adopted, or swept by their worker once another finished the
            // transfer. The one window no journal covers: a SIGKILL after S3
            // created an upload and before the journal recorded its id. Such an
            // upload holds no parts (parts go out only after the journal has the
            // id), and each kill can leave at most one per multipart transfer in flight.
            struct Upload: Decodable { var key: String; var uploadId: String; var parts: Int }
            var left: [Upload] = []
            _ = try await eventually(timeout: 60) {
                left = try JSONDecoder().decode([Upload].self, from: Data(try await Boto3(env.server)("upload-parts", "fleet", "public/fleet/").utf8))
                return left.isEmpty
            }
            if !left.isEmpty { print("fleet: multipart uploads left after the kills: \(left.map { "\($0.key) (\($0.parts) parts)" })") }
            #expect(left.allSatisfy { $0.parts == 0 }, "uploads with parts left behind: \(left.filter { $0.parts > 0 }.map(\.key))")
            #expect(left.count <= kills * 6, "\(left.count) empty uploads left by \(kills) kills of a worker with 6 transfers at once")

            let workers = incarnations
            print("""
                fleet figures: \(total) requests (\(large) multipart of 12 MiB, \(total - large) single PUT), \(kills) SIGKILLs, \
                \(workers.count) worker processes; uploads resumed from the journal: \(count("resuming multipart upload", in: workers)), \
                adopted from another worker: \(count("adopting the multipart upload", in: workers)); \
                redelivered requests recognised (object already had the id): \(count("the object already holds transfer", in: workers)), \
                answered from the finished set: \(count("already finished (", in: workers)), repeated terminal statuses: \(repeatedStatuses); \
                empty uploads left: \(left.count); trigger invocations: \(audit.count) for \(identities.count) objects (\(audit.count - identities.count) duplicates suppressed by (bucket, key, sequencer))
                """)
            for w in workers where w.isRunning { await w.stop() }
            _ = others
        }
    }

    /// A worker killed during a 64 MiB upload: a worker with another state
    /// dir adopts the upload and sends only the missing parts; the killed
    /// worker, restarted on its own journal, resumes the next one the same way.
    @Test func aKilledMultipartUploadResumesWithOnlyTheMissingParts() async throws {
        try await withFleet("resume", proxy: true) { env, proxy in
            let proxy = try #require(proxy)
            let flags = ["--bandwidth-limit", "6MiB", "--part-concurrency", "2"]
            func enqueue(_ id: String) async throws -> URL {
                let file = env.dataRoot.appendingPathComponent("in/\(id).bin")
                try writeSource(file, size: 64 << 20, seed: UInt64(id.utf8.count))
                try await env.kcat.produce(topic: "ferry.requests", key: "fleet/\(id)", value: """
                    {"id":"\(id)","op":"upload","bucket":"fleet","key":"\(id).bin","source":"\(file.absoluteString)"}
                    """)
                return file
            }

            /// A capped worker on `stateDir` runs `id` until three of its eight
            /// parts are stored, then is SIGKILLed. The proxy's count is read at
            /// once; the status topic can lag by seconds under load, long
            /// enough for the whole upload to finish before the kill.
            func killHalfWay(_ id: String, name: String, stateDir: String) async throws {
                let before = proxy.uploadedParts
                let w = try env.startWorker(name: name, stateDir: stateDir, extra: flags)
                #expect(await eventually(timeout: 90, every: 0.05) { proxy.uploadedParts - before >= 3 }, "\(w.log)")
                await w.stop(signal: SIGKILL, timeout: 5)
                #expect(proxy.uploadedParts - before < 8, "\(name) stored every part before the kill")
            }
            /// An uncapped worker on `stateDir` finishes `id`; returns it and the parts it sent.
            func finish(_ id: String, name: String, stateDir: String) async throws -> (BackgroundProcess, Int) {
                let before = proxy.uploadedParts
                let w = try env.startWorker(name: name, stateDir: stateDir, extra: ["--part-concurrency", "2", "--worker-id", name])
                let done = try #require(try await env.terminalStatus(of: id, timeout: 120), "\(w.log)")
                #expect(done.state == .completed && done.worker == name, "\(done)")
                await w.stop()
                return (w, proxy.uploadedParts - before)
            }

            // 1. Killed at about half; another worker (fresh state) adopts the upload.
            let first = try await enqueue("resume-1")
            try await killHalfWay("resume-1", name: "resume-a", stateDir: "state-a")
            let storedFirst = proxy.uploadedParts
            let (b, sentByB) = try await finish("resume-1", name: "resume-b", stateDir: "state-b")
            #expect(b.log.contains("adopting the multipart upload"), "\(b.log)")
            #expect(storedFirst >= 3 && sentByB <= 8 - storedFirst, "before the kill \(storedFirst), after \(sentByB) of 8")

            // 2. The same with B's state dir: restarted on its own journal, it resumes.
            let beforeSecond = proxy.uploadedParts
            let second = try await enqueue("resume-2")
            try await killHalfWay("resume-2", name: "resume-b2", stateDir: "state-b")
            let storedSecond = proxy.uploadedParts - beforeSecond
            let (b3, sentByB3) = try await finish("resume-2", name: "resume-b3", stateDir: "state-b")
            #expect(b3.log.contains("resuming multipart upload"), "\(b3.log)")
            #expect(storedSecond >= 3 && sentByB3 <= 8 - storedSecond, "second: \(storedSecond) then \(sentByB3)")

            // Both objects byte-exact.
            let stored = try JSONDecoder().decode([String: String].self,
                                                  from: Data(try await Boto3(env.server)("sha256-all", "fleet", "public/resume-").utf8))
            let expected = try await sha256([first, second])
            #expect(stored["public/resume-1.bin"] == expected[first.path])
            #expect(stored["public/resume-2.bin"] == expected[second.path])
            print("""
                resume figures: 64 MiB = 8 parts; kill 1: \(storedFirst) parts stored, other worker sent \(sentByB); \
                kill 2: \(storedSecond) parts stored, restarted worker sent \(sentByB3)
                """)
        }
    }

    /// Broker faults from the mock cluster while 60 requests run: failed
    /// produce, fetch and commit requests, and a broker down for a while.
    @Test func brokerFaultsLoseNothingAndDuplicateNothing() async throws {
        try await withFleet("broker-faults") { env, _ in
            let total = 60
            var files: [URL] = []
            var messages: [(key: String, value: String)] = []
            for i in 0..<total {
                let file = env.dataRoot.appendingPathComponent("in/b-\(i).bin")
                try writeSource(file, size: 10_000 + i * 1_000, seed: UInt64(1000 + i))
                files.append(file)
                messages.append(("fleet/faults/b-\(i).bin", """
                    {"id":"faults-\(i)","op":"upload","bucket":"fleet","key":"faults/b-\(i).bin","source":"\(file.absoluteString)"}
                    """))
            }
            // Broker 2, taken down below, is the workers' group coordinator: its outage is the coordinator's too.
            try env.cluster.setGroupCoordinator(Topics().workerGroup, broker: 2)
            // The outage must stay shorter than a session: the mock names members by address, and a live
            // member whose session ran out while it was cut off can find its old id reused by a member that
            // joined since; joining again under it makes the mock abort this process (rdkafka_mock_cgrp.c:567,
            // see EmbeddedKafkaCluster.groupHeartbeatIntervalMs). A member heard from at most 1 s before a 2 s
            // outage (heartbeats each second), reconnecting at most 0.75 s after it, has 2 s of its 6 s to spare.
            let steady = ["--bandwidth-limit", "1MiB", "--kafka-property", "reconnect.backoff.max.ms=500"]
            let w1 = try env.startWorker(name: "faults-1", stateDir: "faults-1", extra: steady)
            let w2 = try env.startWorker(name: "faults-2", stateDir: "faults-2", extra: steady)
            try await env.kcat.produceMany(topic: "ferry.requests", Array(messages.prefix(30)))
            #expect(try await eventually(timeout: 90, every: 1) { try await terminalStatuses(env).count >= 5 })
            env.cluster.failNextRequests(.produce, with: [.notLeaderForPartition, .requestTimedOut, .notEnoughReplicas,
                                                          .notLeaderForPartition, .requestTimedOut])
            // Commit errors that keep the coordinator. On NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE
            // librdkafka closes its coordinator connection; a member whose join was pending there joins
            // again on a new one. librdkafka 2.0.2's mock stops reading a connection while it holds a
            // join, so it never saw the close, meets the member joining twice and aborts this process
            // (rdkafka_mock_cgrp.c:567, '!member->resp'). The coordinator's outage stays in the test:
            // broker 2, its coordinator, goes down below.
            env.cluster.failNextRequests(.offsetCommit, with: [.coordinatorLoadInProgress, .requestTimedOut, .requestTimedOut])
            env.cluster.failNextRequests(.fetch, with: [.notLeaderForPartition, .notLeaderForPartition])
            env.cluster.setBroker(2, up: false)
            // Produced while the broker is down: kcat waits for it like any producer would.
            let producing = Task { [kcat = env.kcat] in try await kcat.produceMany(topic: "ferry.requests", Array(messages.suffix(30))) }
            try await Task.sleep(for: .seconds(2))
            env.cluster.setBroker(2, up: true)
            try await producing.value
            let allDone = try await eventually(timeout: 240, every: 1) { try await terminalStatuses(env).count >= total }
            #expect(allDone, "\(w1.log.suffix(2000))")
            let terminal = try await terminalStatuses(env)
            for i in 0..<total {
                #expect(Set((terminal["faults-\(i)"] ?? []).map(\.state)) == [.completed], "faults-\(i)")
            }
            let stored = try JSONDecoder().decode([String: String].self,
                                                  from: Data(try await Boto3(env.server)("sha256-all", "fleet", "public/faults/").utf8))
            let expected = try await sha256(files)
            for (i, file) in files.enumerated() { #expect(stored["public/faults/b-\(i).bin"] == expected[file.path], "b-\(i)") }
            #expect(try await eventually(timeout: 60) {
                Set(env.auditLines().compactMap { $0["key"] as? String }.filter { $0.hasPrefix("public/faults/") }).count == total
            })
            let audit = env.auditLines().filter { ($0["key"] as? String)?.hasPrefix("public/faults/") == true }
            let identities = Dictionary(grouping: audit) { $0["key"] as? String ?? "" }
                .mapValues { Set($0.compactMap { $0["sequencer"] as? String }) }
            #expect(identities.values.allSatisfy { $0.count == 1 })
            print("broker-fault figures: \(total) requests, 5 produce + 3 commit + 2 fetch errors injected, broker 2 down 2 s; "
                  + "trigger invocations \(audit.count) for \(identities.count) objects")
            await w1.stop()
            await w2.stop()
        }
    }
}

/// A server reached through a proxy: same credentials, another endpoint.
struct ProxiedServer: S3TestServer {
    let base: any S3TestServer
    let endpoint: String
    var name: String { base.name }
    var accessKeyId: String { base.accessKeyId }
    var secretAccessKey: String { base.secretAccessKey }
    func stop() async {}
}
