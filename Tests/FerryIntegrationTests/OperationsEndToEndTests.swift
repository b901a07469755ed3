import FerryClient
import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Synchronization
import Testing

/// What an operator sees of a running worker: /metrics, /healthz, /readyz and
/// the admin API scraped with curl, JSON logs, `ferry status` and `ferry watch`.
@Suite(.serialized) struct OperationsEndToEndTests {
    let logger = Logger(label: "test.ops")

    func curl(_ arguments: String...) async throws -> (status: Int, body: String) {
        let result = try await runCommand("curl", ["-s", "-w", "\n%{http_code}"] + arguments, timeout: 30)
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
    }

    @Test func endpointsAdminAPIAndStatusCommands() async throws {
        let base = try TestPaths.temporaryDirectory("ops")
        let moto = try await MotoServer.start(logDirectory: base)
        defer { try? FileManager.default.removeItem(at: base) }
        do {
            let env = try EndToEndTests.Environment.oneBroker(base: base, server: moto, bucket: "ops", logger: logger)
            let (cluster, dataRoot) = (env.cluster, env.dataRoot)
            try await Boto3(moto)("create-bucket", "ops")
            let token = "ops-admin-\(UUID().uuidString)"
            let tokenFile = base.appendingPathComponent("admin-token")
            try (token + "\n").write(to: tokenFile, atomically: true, encoding: .utf8)
            let admin = "Authorization: Bearer \(token)"
            let worker = try env.startWorker(name: "ops-worker", stateDir: "ops-state",
                                             extra: ["--http-address", "127.0.0.1:0", "--bandwidth-limit", "2MiB",
                                                     "--log-format", "json", "--admin-token-file", tokenFile.path])
            let http = try await worker.workerHTTPEndpoint()
            #expect(await eventually(timeout: 30) { (try? await curl("\(http)/healthz").status) == 200 }, "\(worker.log)")
            let ready = try await eventually(timeout: 30) { try await curl("\(http)/readyz").status == 200 }
            #expect(ready, "\(worker.log.suffix(2000))")

            // A 24 MiB upload at 2 MiB/s: slow enough to steer through the admin API. At 4 MiB/s
            // (6 s) it once ended before the test, slowed by the tests beside it, could pause it.
            let source = dataRoot.appendingPathComponent("big.bin")
            try Data(repeating: 0x5A, count: 24 << 20).write(to: source)
            try await env.kcat.produce(topic: "ferry.requests", key: "ops/big.bin", value: """
                {"id":"ops-1","op":"upload","bucket":"ops","key":"big.bin","source":"\(source.absoluteString)"}
                """)
            #expect(try await eventually(timeout: 30) { try await curl("-H", admin, "\(http)/transfers").body.contains(#""id":"ops-1""#) })
            // Without the token: 401, no key shown, nothing steered.
            let anonymous = try await curl("\(http)/transfers")
            #expect(anonymous.status == 401 && !anonymous.body.contains("big.bin"), "\(anonymous.body)")
            #expect(try await curl("-X", "POST", "-H", "Authorization: Bearer wrong-token-0123456789", "\(http)/transfers/ops-1/cancel").status == 401)
            #expect(try await curl("-X", "POST", "\(http)/transfers/ops-1/pause").status == 401)
            #expect(try await curl("-H", admin, "\(http)/transfers/ops-1").body.contains(#""state":"running""#), "still running")
            let pause = try await curl("-X", "POST", "-H", admin, "\(http)/transfers/ops-1/pause")
            #expect(pause.status == 202, "\(pause.body)")
            #expect(try await curl("-X", "POST", "-H", admin, "\(http)/transfers/ops-1/pause").status == 409, "already paused")
            #expect(try await eventually(timeout: 10) { try await curl("-H", admin, "\(http)/transfers/ops-1").body.contains(#""state":"paused""#) })
            #expect(try await eventually(timeout: 10) { try await env.statuses().contains { $0.id == "ops-1" && $0.state == .paused } })
            #expect(try await curl("-X", "POST", "-H", admin, "\(http)/transfers/ops-1/resume").status == 202)
            #expect(try await env.terminalStatus(of: "ops-1", timeout: 60)?.state == .completed)
            let finished = try await curl("-H", admin, "\(http)/transfers/ops-1")
            #expect(finished.status == 200 && finished.body.contains(#""state":"completed""#), "\(finished.body)")
            #expect(try await curl("-X", "POST", "-H", admin, "\(http)/transfers/ops-1/cancel").status == 404, "not running any more")
            // Nothing in the statuses came from the refused requests: never cancelled.
            #expect(!(try await env.statuses().contains { $0.id == "ops-1" && $0.state == .cancelled }))

            // A bad request, for the DLQ counter.
            try await env.kcat.produce(topic: "ferry.requests", key: "x", value: "not json")
            #expect(try await eventually(timeout: 30) {
                try await curl("\(http)/metrics").body.contains(#"ferry_dlq_messages_total{topic="ferry.requests.dlq"} 1"#)
            })
            let metrics = try await curl("\(http)/metrics").body
            for needle in [#"ferry_transfers_total{op="upload",outcome="completed"} 1"#,
                           #"ferry_transfer_bytes_total{op="upload"} 25165824"#,
                           #"ferry_s3_request_duration_seconds_bucket{operation="UploadPart""#,
                           #"ferry_consumer_lag{topic="ferry.requests""#,
                           "ferry_outbox_depth 0", "ferry_transfers_in_flight 0"] {
                #expect(metrics.contains(needle), "missing \(needle) in:\n\(metrics)")
            }
            // The trigger groups' lag, sampled every 5 s: the events' group and a stream trigger's.
            var lagLines: [Substring] = []
            let lagged = try await eventually(timeout: 30) {
                lagLines = try await curl("\(http)/metrics").body.split(separator: "\n").filter { $0.hasPrefix("ferry_trigger_offset_lag{") }
                return lagLines.contains { $0.contains(#"group="ferry-triggers""#) && $0.contains(#"topic="ferry.events""#) }
                    && lagLines.contains { $0.contains(#"group="ferry-triggers.object-index""#) && $0.contains(#"topic="ferry.streams""#) }
            }
            #expect(lagged, "\(lagLines)")
            #expect(metrics.contains(#"ferry_trigger_lane_messages{group="ferry-triggers"}"#), "\(metrics)")
            // Each group consumer's assignment: the only worker holds both request partitions, and some events'.
            var assignmentLines: [Substring] = []
            let assigned = try await eventually(timeout: 30) {
                assignmentLines = try await curl("\(http)/metrics").body.split(separator: "\n")
                    .filter { $0.hasPrefix("ferry_consumer_assigned_partitions{") || $0.hasPrefix("ferry_consumer_rebalances_total{") }
                func value(_ series: String) -> Double? {
                    assignmentLines.first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
                }
                return value(#"ferry_consumer_assigned_partitions{group="ferry-workers"}"#) == 2
                    && (value(#"ferry_consumer_assigned_partitions{group="ferry-triggers"}"#) ?? 0) > 0
                    && (value(#"ferry_consumer_rebalances_total{group="ferry-workers"}"#) ?? 0) >= 1
            }
            #expect(assigned, "\(assignmentLines)")

            // JSON logs: every line about the transfer names it, its partition and its offset.
            let lines = worker.log.split(separator: "\n").filter { $0.hasPrefix("{") }
            let about = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String] }
                .filter { $0["transfer"] == "ops-1" }
            #expect(about.count >= 3, "\(worker.log.suffix(2000))")
            #expect(about.allSatisfy { $0["partition"] != nil && $0["offset"] != nil }, "\(about)")

            // The CLI: status and watch.
            let status = try await runCommand(TestPaths.ferryBinary, ["status", "ops-1", "--bootstrap-servers", cluster.bootstrapServers])
            #expect(status.status == 0 && status.stdout.contains("ops-1 completed"), "\(status.stdout)\(status.stderr)")
            let json = try await runCommand(TestPaths.ferryBinary, ["status", "ops-1", "--json", "--bootstrap-servers", cluster.bootstrapServers])
            #expect(try JSONDecoder().decode(TransferStatus.self, from: Data(json.stdout.utf8)).state == .completed)
            let unknown = try await runCommand(TestPaths.ferryBinary, ["status", "nope", "--bootstrap-servers", cluster.bootstrapServers])
            #expect(unknown.status == 2 && unknown.stderr.contains("no status for nope"))
            let watch = try await runCommand(TestPaths.ferryBinary, ["watch", "--from-beginning", "--for", "3",
                                                                     "--bootstrap-servers", cluster.bootstrapServers], timeout: 60)
            #expect(watch.status == 0 && watch.stdout.contains("ops-1 completed"), "\(watch.stdout)\(watch.stderr)")
            // The Swift producer library: build, enqueue, await the outcome, stream progress.
            let client = try TransferClient(bootstrapServers: cluster.bootstrapServers, logger: logger)
            let small = dataRoot.appendingPathComponent("small.txt")
            try Data("hello from FerryClient".utf8).write(to: small)
            let seen = Mutex<[TransferStatus.State]>([])
            let done = try await client.run(.upload(id: "ops-client", from: small.absoluteString, to: "ops", key: "client.txt"),
                                            timeout: 60) { status in seen.withLock { $0.append(status.state) } }
            #expect(done.state == .completed && done.object?.key == "public/client.txt")
            #expect(seen.withLock { $0.first } == .accepted)
            let refused = try await client.run(.download(id: "ops-refused", from: "ops", key: "client.txt", to: "file:///etc/passwd"),
                                               timeout: 60)
            #expect(refused.state == .rejected && refused.error?.code == "InvalidPath", "\(refused)")
            let progress = try await client.progress(of: "ops-progress")
            try await client.enqueue(.upload(id: "ops-progress", from: source.absoluteString, to: "ops", key: "again.bin"))
            var updates: [TransferProgressUpdate] = []
            for await update in progress { updates.append(update) }
            #expect(updates.last?.state == .completed)
            #expect(updates.contains { $0.state == .running && ($0.fraction ?? 0) > 0 && ($0.fraction ?? 1) < 1 }, "\(updates)")

            let stopped = await worker.stop()
            #expect(stopped == 0, "\(worker.log.suffix(3000))")

            // `ferry cp --recursive`: a directory to a prefix and back, byte-exact.
            let tree = base.appendingPathComponent("tree")
            try FileManager.default.createDirectory(at: tree.appendingPathComponent("sub"), withIntermediateDirectories: true)
            for (i, name) in ["a.bin", "b.txt", "sub/c.bin"].enumerated() {
                try Data((0..<(10_000 * (i + 1))).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i) }).write(to: tree.appendingPathComponent(name))
            }
            // A link and a FIFO are not copied, and said so (the copy still succeeds).
            #expect(symlink(tree.appendingPathComponent("a.bin").path, tree.appendingPathComponent("sub/link").path) == 0)
            #expect(mkfifo(tree.appendingPathComponent("fifo").path, 0o644) == 0)
            let cpEnv = moto.clientEnvironment
            let upload = try await runCommand(TestPaths.ferryBinary, ["cp", "--recursive", tree.path, "s3://ops/tree", "--max-transfers", "3"],
                                              environment: cpEnv)
            #expect(upload.status == 0, "\(upload.stderr)")
            #expect(upload.stdout.hasPrefix("3 objects"), "\(upload.stdout)")
            #expect(upload.stderr.contains("sub/link: not copied: a symbolic link"), "\(upload.stderr)")
            #expect(upload.stderr.contains("fifo: not copied: a FIFO"), "\(upload.stderr)")
            let back = base.appendingPathComponent("back")
            let down = try await runChecked(TestPaths.ferryBinary, ["cp", "--recursive", "s3://ops/tree/", back.path], environment: cpEnv)
            #expect(down.hasPrefix("3 objects"), "\(down)")
            for name in ["a.bin", "b.txt", "sub/c.bin"] {
                #expect(try Data(contentsOf: back.appendingPathComponent(name)) == Data(contentsOf: tree.appendingPathComponent(name)), "\(name)")
            }

            // `ferry cp` to a folder names the copy as cp and aws s3 cp do: `s3://bucket`,
            // `s3://bucket/dir/`, an existing directory or a path ending in `/` receive the
            // source under its own name (`dir/` had been written as a file named `dir`).
            let b = tree.appendingPathComponent("b.txt")
            let folders = base.appendingPathComponent("folders")
            try FileManager.default.createDirectory(at: folders.appendingPathComponent("existing"), withIntermediateDirectories: true)
            for (from, to, expected) in [(b.path, "s3://ops/into/", "s3://ops/into/b.txt"), (b.path, "s3://ops", "s3://ops/b.txt"),
                                         ("s3://ops/tree/sub/c.bin", "s3://ops/copies/", "s3://ops/copies/c.bin"),
                                         ("s3://ops/tree/b.txt", folders.appendingPathComponent("existing").path, "existing/b.txt"),
                                         ("s3://ops/tree/b.txt", folders.path + "/new/", "new/b.txt"),
                                         ("s3://ops/tree/b.txt", folders.path + "/named.txt", "named.txt")] {
                let result = try await runCommand(TestPaths.ferryBinary, ["cp", from, to], environment: cpEnv)
                #expect(result.status == 0 && result.stdout.contains("→ \(expected.hasPrefix("s3://") ? expected : folders.path + "/" + expected):"),
                        "cp \(from) \(to): \(result.stdout) \(result.stderr)")
            }
            let stored = try await Boto3(moto)("sha256-all", "ops", "")
            for key in ["into/b.txt", "b.txt", "copies/c.bin"] { #expect(stored.contains("\"\(key)\""), "\(key) in \(stored)") }
            for name in ["existing/b.txt", "new/b.txt", "named.txt"] {
                #expect(try Data(contentsOf: folders.appendingPathComponent(name)) == Data(contentsOf: b), "\(name)")
            }
        } catch {
            await moto.stop()
            throw error
        }
        await moto.stop()
    }
}
