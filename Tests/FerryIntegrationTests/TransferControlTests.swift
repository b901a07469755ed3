import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// Pause, resume and cancel as TransferUtility promises them, through real
/// workers (mock Kafka cluster, moto behind a logging proxy that sees every
/// request body, complete or cut short): a pause moves no byte, is remembered
/// across SIGKILL, restarts and rebalances, and a cancel reaches a request
/// that is queued or not yet consumed.
@Suite(.serialized) struct TransferControlTests {
    let logger = Logger(label: "test.control")

    struct Setup {
        var env: EndToEndTests.Environment
        var proxy: FaultProxy
        var base: URL

        func worker(_ name: String, state: String? = nil, extra: [String] = [], environment: [String: String] = [:]) throws -> BackgroundProcess {
            try WorkerCommandLine(bootstrapServers: env.cluster.bootstrapServers, storage: .s3(endpoint: proxy.endpoint), dataRoot: env.dataRoot,
                                  stateDirectory: base.appendingPathComponent(state ?? "state-\(name)"), workerId: name, logLevel: "debug", extra: extra)
                .start(name: name, environment: env.server.clientEnvironment.merging(environment) { $1 }, logDirectory: base)
        }

        func file(_ name: String, mebibytes: Int) throws -> URL {
            let url = env.dataRoot.appendingPathComponent(name)
            var bytes = Data(count: mebibytes << 20)
            bytes.withUnsafeMutableBytes { raw in
                var x: UInt64 = 0x2545_F491_4F6C_DD1D &+ UInt64(mebibytes)
                for i in 0..<raw.count { x ^= x << 13; x ^= x >> 7; x ^= x << 17; raw[i] = UInt8(truncatingIfNeeded: x) }
            }
            try bytes.write(to: url)
            return url
        }

        func upload(_ id: String, _ source: URL, key: String, kafkaKey: String? = nil) async throws {
            try await env.kcat.produce(topic: "ferry.requests", key: kafkaKey ?? "ctl/\(key)", value: """
                {"id":"\(id)","op":"upload","bucket":"ctl","key":"\(key)","source":"\(source.absoluteString)"}
                """)
        }

        func statuses(of id: String) async throws -> [TransferStatus] { try await env.statuses().filter { $0.id == id } }

        /// Requests the proxy saw for `key`: "METHOD path status" lines and "aborted …" lines.
        func wire(_ key: String) -> [String] {
            proxy.injected.map(String.init).filter {
                $0.contains("/ctl/public/\(key)") && !$0.hasPrefix("signed-by") && !$0.hasPrefix("sse-c") && !$0.hasPrefix("HEAD ")
            }
        }
    }

    func withSetup(_ label: String, _ body: (Setup) async throws -> Void) async throws {
        let base = try TestPaths.temporaryDirectory("control-\(label)")
        let moto = try await MotoServer.start(logDirectory: base)
        let proxy = try await FaultProxy.start(upstream: moto.endpoint, rate: 0, logRequests: true, in: base)
        do {
            let env = try EndToEndTests.Environment.oneBroker(base: base, server: moto, bucket: "ctl", logger: logger)
            try await Boto3(moto)("create-bucket", "ctl")
            try await body(Setup(env: env, proxy: proxy, base: base))
        } catch {
            await proxy.process.stop(); await moto.stop()
            throw error
        }
        await proxy.process.stop()
        await moto.stop()
        try? FileManager.default.removeItem(at: base)
    }

    /// An 8 MiB single PUT, paused mid-request: the request is cut at once, no
    /// byte goes out while paused, and on resume the PUT starts again and completes.
    @Test func aPausedSinglePutMovesNothingUntilResumed() async throws {
        try await withSetup("single") { s in
            // 512 KiB/s: the 8 MiB PUT runs 16 s, so the pause lands mid-request
            // even when statuses lag by seconds under load.
            let worker = try s.worker("w-single", extra: ["--bandwidth-limit", "512KiB"])
            let source = try s.file("single.bin", mebibytes: 8)
            try await s.upload("ctl-single", source, key: "single.bin")
            #expect(await eventually(timeout: 60) {
                (try? await s.statuses(of: "ctl-single").contains { $0.state == .running && ($0.bytesTransferred ?? 0) >= 1 << 20 }) == true
            }, "\(worker.log.suffix(2000))")
            _ = try await s.env.ferry(["pause", "ctl-single"])
            #expect(await eventually(timeout: 20) { (try? await s.statuses(of: "ctl-single").last?.state) == .paused })
            try await Task.sleep(for: .seconds(1))
            let atPause = s.wire("single.bin")
            try await Task.sleep(for: .seconds(5))
            // The PUT in flight was cut short; nothing else was sent while paused, nothing stored.
            #expect(atPause.count == 1 && atPause[0].hasPrefix("aborted PUT"), "\(atPause)")
            #expect(s.wire("single.bin") == atPause, "bytes moved while paused: \(s.wire("single.bin"))")
            #expect((try? await Boto3(s.env.server)("head", "ctl", "public/single.bin")) == nil)
            let whilePaused = try await s.statuses(of: "ctl-single")
            // The last status says so: paused, with nothing kept (the PUT starts over).
            #expect(whilePaused.last?.state == .paused && whilePaused.last?.bytesTransferred == 0, "\(whilePaused.suffix(3))")

            _ = try await s.env.ferry(["resume", "ctl-single"])
            let final = try await s.env.terminalStatus(of: "ctl-single", timeout: 60)
            #expect(final?.state == .completed, "\(final?.error?.message ?? "") \(worker.log.suffix(2000))")
            let wire = s.wire("single.bin")
            #expect(wire.filter { $0.hasPrefix("PUT ") && $0.hasSuffix(" 200") }.count == 1, "\(wire)")
            let stored = try await Boto3(s.env.server).get(bucket: "ctl", key: "public/single.bin", to: s.base.appendingPathComponent("got.bin"))
            #expect(stored.ContentLength == 8 << 20)
            #expect(try Data(contentsOf: s.base.appendingPathComponent("got.bin")) == Data(contentsOf: source))
            await worker.stop()
        }
    }

    /// A 60 MiB multipart upload paused after its first parts stays paused when
    /// its worker is SIGKILLed and restarted, and when the partition moves to a
    /// second worker; after `resume` it completes without storing a part twice.
    @Test func aPauseOutlivesSIGKILLAndRebalance() async throws {
        try await withSetup("durable") { s in
            let limit = ["--bandwidth-limit", "4MiB"]
            var first = try s.worker("w-first", state: "state-first", extra: limit)
            let source = try s.file("big.bin", mebibytes: 60)
            try await s.upload("ctl-big", source, key: "big.bin")
            func partsStored() -> Int { s.wire("big.bin").filter { $0.contains("partNumber=") && $0.hasPrefix("PUT ") && $0.hasSuffix(" 200") }.count }
            #expect(await eventually(timeout: 90) { partsStored() >= 2 }, "\(first.log.suffix(2000))")
            _ = try await s.env.ferry(["pause", "ctl-big"])
            #expect(await eventually(timeout: 20) { (try? await s.statuses(of: "ctl-big").last?.state) == .paused })
            try await Task.sleep(for: .seconds(1))
            let atPause = partsStored()

            // SIGKILL and restart with the same state: the redelivered request starts paused.
            await first.stop(signal: SIGKILL)
            first = try s.worker("w-first", state: "state-first", extra: limit)
            #expect(await eventually(timeout: 60) {
                (try? await s.statuses(of: "ctl-big").contains { $0.state == .paused && $0.worker == "w-first" && $0.attempt != nil }) == true
                    && first.log.contains("ctl-big")
            })
            try await Task.sleep(for: .seconds(8))
            #expect(partsStored() == atPause, "parts sent while paused after a restart")

            // A second worker joins; the first leaves: the partition moves, the pause holds.
            let second = try s.worker("w-second", extra: limit)
            try await Task.sleep(for: .seconds(3))
            await first.stop()
            #expect(await eventually(timeout: 90) {
                (try? await s.statuses(of: "ctl-big").contains { $0.state == .paused && $0.worker == "w-second" }) == true
            }, "\(second.log.suffix(3000))")
            try await Task.sleep(for: .seconds(5))
            #expect(partsStored() == atPause, "parts sent while paused after a rebalance")
            #expect(try await s.statuses(of: "ctl-big").allSatisfy { !$0.state.isTerminal })

            _ = try await s.env.ferry(["resume", "ctl-big"])
            let final = try await s.env.terminalStatus(of: "ctl-big", timeout: 120)
            #expect(final?.state == .completed && final?.worker == "w-second", "\(final?.error?.message ?? "") \(second.log.suffix(3000))")
            // 8 parts of 8 MiB; none stored twice (aborted ones never reached storage).
            #expect(partsStored() == 8, "\(s.wire("big.bin").filter { $0.contains("partNumber") })")
            let sha = try await Boto3(s.env.server)("sha256-all", "ctl", "public/big.bin")
            #expect(sha.contains(try await sha256(source.path)))
            await second.stop()
        }
    }

    /// Twins through a rebalance: the partition that moves hands its running
    /// transfer off, and the twin waiting behind it must not start one of its
    /// own on the worker the partition leaves (the new owner runs the request).
    /// One twin pair per partition, so whichever partition moves has one.
    @Test func aTwinWaitingOnAPartitionThatMovesStartsNothing() async throws {
        try await withSetup("twin-move") { s in
            // 512 KiB/s shared by two uploads of 12 MiB: 48 s each, far longer than a join takes.
            let first = try s.worker("w-stay", extra: ["--bandwidth-limit", "512KiB", "--rebalance-grace", "1"])
            var sources: [String: URL] = [:]
            for partition in 0..<2 {
                let id = "move-\(partition)"
                let source = try s.file("\(id).bin", mebibytes: 12 + partition)
                sources[id] = source
                for _ in 0..<2 {
                    try await s.env.kcat.produce(topic: "ferry.requests", key: "ctl/\(id).bin", value: """
                        {"id":"\(id)","op":"upload","bucket":"ctl","key":"\(id).bin","source":"\(source.absoluteString)"}
                        """, partition: partition)
                }
            }
            #expect(await eventually(timeout: 60) {
                first.log.contains("transfer move-0 is already running") && first.log.contains("transfer move-1 is already running")
            }, "\(first.log.suffix(2000))")
            let second = try s.worker("w-join", extra: ["--bandwidth-limit", "8MiB"])
            for id in sources.keys.sorted() {
                let final = try await s.env.terminalStatus(of: id, timeout: 120)
                #expect(final?.state == .completed, "\(id): \(first.log.suffix(2000)) \(second.log.suffix(2000))")
            }
            try await Task.sleep(for: .seconds(3))
            for (id, source) in sources {
                // One PUT stored it (the handed-off one was cut short): nothing ran it a second time.
                let stored = s.wire("\(id).bin").filter { $0.hasPrefix("PUT ") && $0.hasSuffix(" 200") }
                #expect(stored.count == 1, "\(id): \(s.wire("\(id).bin"))")
                let sha = try await Boto3(s.env.server)("sha256-all", "ctl", "public/\(id).bin")
                #expect(sha.contains(try await sha256(source.path)), "\(id)")
            }
            #expect(second.log.contains("accepted"), "the partition that moved was run by the joining worker: \(second.log.suffix(2000))")
            await first.stop()
            await second.stop()
        }
    }

    /// Cancels of requests the worker has not reached (queued behind 20 others
    /// in its partition), of one waiting for a transfer slot, and of one that
    /// already finished (no effect, a log line).
    @Test func cancelReachesQueuedRequests() async throws {
        try await withSetup("queued") { s in
            let worker = try s.worker("w-queue", extra: ["--max-transfers", "1", "--bandwidth-limit", "2MiB"])
            let source = try s.file("one.bin", mebibytes: 1)
            // One partition (one Kafka key): 20 uploads, then the one to cancel.
            for n in 1...21 { try await s.upload("q-\(n)", source, key: "q-\(n).bin", kafkaKey: "ctl/queue") }
            _ = try await s.env.ferry(["cancel", "q-21"])
            _ = try await s.env.ferry(["cancel", "q-3"])
            #expect(await eventually(timeout: 30) { (try? await s.statuses(of: "q-1").last?.state) == .completed })
            _ = try await s.env.ferry(["cancel", "q-1"])
            let last = try await s.env.terminalStatus(of: "q-21", timeout: 120)
            #expect(last?.state == .cancelled && last?.error?.code == "Cancelled", "\(String(describing: last))")
            #expect(try await s.env.terminalStatus(of: "q-3")?.state == .cancelled)
            for n in [1, 2] + Array(4...20) {
                #expect(try await s.env.terminalStatus(of: "q-\(n)", timeout: 60)?.state == .completed, "q-\(n)")
            }
            for key in ["q-21.bin", "q-3.bin"] {
                #expect((try? await Boto3(s.env.server)("head", "ctl", "public/\(key)")) == nil, "\(key) was written")
                #expect(s.wire(key).isEmpty, "\(key): \(s.wire(key))")
            }
            #expect(try await s.statuses(of: "q-1").last?.state == .completed, "a cancel after the end changes nothing")
            #expect(worker.log.contains("control cancel for q-1: already finished here (completed); no effect"), "\(worker.log.suffix(2000))")
            await worker.stop()
        }
    }

    /// One request sent twice (a producer's retry: same id, same Kafka key)
    /// reaches one worker as two messages it takes side by side. The id is
    /// the request's idempotency key: one upload goes to the store, one
    /// ObjectCreated event is announced, the second message is answered from
    /// the finished set, and a cancel reaches the transfer, not a twin. The
    /// wait is not the checks' time: their watchdog (2 s here) does not fire.
    @Test func aRequestSentTwiceAtOnceRunsOnce() async throws {
        try await withSetup("twice") { s in
            let worker = try s.worker("w-twice", extra: ["--bandwidth-limit", "1MiB"],
                                      environment: ["FERRY_TEST_CHECK_LIMIT_SECONDS": "2"])
            let source = try s.file("twice.bin", mebibytes: 4)
            try await s.upload("twice-1", source, key: "twice.bin")
            try await s.upload("twice-1", source, key: "twice.bin")
            let final = try await s.env.terminalStatus(of: "twice-1", timeout: 60)
            #expect(final?.state == .completed, "\(worker.log.suffix(2000))")
            // Both messages have their outcome (the second from the finished set) before the count.
            #expect(await eventually(timeout: 30) { (try? await s.statuses(of: "twice-1").filter { $0.state == .completed }.count) == 2 },
                    "\(worker.log.suffix(2000))")
            let puts = s.wire("twice.bin").filter { $0.hasPrefix("PUT ") }
            #expect(puts.count == 1, "\(puts)")
            let events = try await s.env.kcat.consumeAll(topic: Topics().events).filter { $0.value.contains("public/twice.bin") }
            #expect(events.count == 1, "\(events.map(\.value))")

            // Cancelled while its twin waits: neither stores anything. 12 MiB at 1 MiB/s leaves the
            // cancel 12 s to arrive (a `ferry cancel` process and a control fetch); with 4 MiB the
            // upload sometimes finished first on two loaded cores.
            let longer = try s.file("twice-2.bin", mebibytes: 12)
            try await s.upload("twice-2", longer, key: "twice-2.bin")
            try await s.upload("twice-2", longer, key: "twice-2.bin")
            #expect(await eventually(timeout: 30) {
                (try? await s.statuses(of: "twice-2").contains { $0.state == .running && ($0.bytesTransferred ?? 0) > 0 }) == true
            })
            _ = try await s.env.ferry(["cancel", "twice-2"])
            #expect(try await s.env.terminalStatus(of: "twice-2")?.state == .cancelled)
            try await Task.sleep(for: .seconds(5))
            #expect(try await s.statuses(of: "twice-2").filter { $0.state.isTerminal }.allSatisfy { $0.state == .cancelled })
            #expect((try? await Boto3(s.env.server)("head", "ctl", "public/twice-2.bin")) == nil, "twice-2.bin was written")
            #expect(worker.log.contains("transfer twice-1 is already running on this worker"), "\(worker.log.suffix(2000))")
            #expect(worker.isRunning, "\(worker.log.suffix(2000))")
            await worker.stop()
        }
    }
}

/// Hex SHA-256 of a file (sha256sum).
private func sha256(_ path: String) async throws -> String {
    String(try await runChecked("sha256sum", [path]).prefix(64))
}
