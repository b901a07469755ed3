import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// The object store goes away under a running worker and comes back (the
/// proxy in front of moto stopped, then started again on its port: connections
/// are refused meanwhile, as from a store that is down). The invariant: an
/// outage fails no request that outlives it. Requests wait (the worker is not
/// ready, and says why), a multipart upload cut in the middle continues from
/// its stored parts, and only a request whose own timeout ends during the
/// outage fails, with the store's error named. A source that gives no answer
/// while the store does is that transfer's failure, not an outage.
@Suite(.serialized) struct StorageOutageTests {
    let logger = Logger(label: "test.outage")

    /// curl's options then the URL last; the status is 0 when curl could not run.
    func curl(_ arguments: String...) async -> (status: Int, body: String) {
        guard let result = try? await runCommand("curl", ["-s", "-w", "\n%{http_code}"] + arguments, timeout: 30) else { return (0, "") }
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
    }

    /// The embedded broker and workers on an S3 endpoint of the test's own
    /// (a loopback answerer, a closed port): no moto.
    struct BareFleet {
        let base: URL, cluster: EmbeddedKafkaCluster, kcat: Kcat, data: URL
        init(_ name: String, logger: Logger) throws {
            base = try TestPaths.temporaryDirectory(name)
            cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
            for topic in Topics().all { try cluster.createTopic(topic, partitions: 2) }
            kcat = Kcat(bootstrapServers: cluster.bootstrapServers)
            data = base.appendingPathComponent("data")
            try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        }

        func worker(_ name: String, store: String, extra: [String] = []) throws -> BackgroundProcess {
            try WorkerCommandLine(bootstrapServers: cluster.bootstrapServers, storage: .s3(endpoint: store), dataRoot: data,
                                  stateDirectory: base.appendingPathComponent(name), workerId: name, logLevel: "debug", extra: extra)
                .start(name: name, environment: ["AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret"], logDirectory: base)
        }

        /// The states `id`'s statuses went through, in the order published.
        func states(of id: String) async throws -> [String] {
            try await kcat.consumeAll(topic: "ferry.status").compactMap {
                try? JSONDecoder().decode(TransferStatus.self, from: Data($0.value.utf8))
            }.filter { $0.id == id }.map(\.state.rawValue)
        }

        /// Queues an upload of a small file named after `id`, to `partition` if given.
        func upload(_ id: String, partition: Int? = nil) async throws {
            let file = data.appendingPathComponent("\(id).txt")
            try Data("file \(id)".utf8).write(to: file)
            try await kcat.produce(topic: "ferry.requests", key: "out/\(id)", value: """
                {"id":"\(id)","op":"upload","bucket":"out","key":"\(id).txt","source":"\(file.absoluteString)"}
                """, partition: partition)
        }
    }

    @Test func requestsWaitThroughAnOutageOfTheStoreAndThenComplete() async throws {
        let base = try TestPaths.temporaryDirectory("outage")
        let moto = try await MotoServer.start(logDirectory: base)
        // Started again on its port after the kill, the proxy needs a port no other socket takes
        // meanwhile: one of freePort's, below the ephemeral range where port-0 binds (the
        // embedded brokers', moto's) land. Such a port can be taken before the first start: try another.
        var proxy: FaultProxy! = nil
        for attempt in 1...3 where proxy == nil {
            do {
                proxy = try await FaultProxy.start(upstream: moto.endpoint, rate: 0, logRequests: true, port: TestPaths.freePort(), in: base)
            } catch where attempt < 3 {
                print("fault proxy: its port was taken; trying another (\(error))")
            }
        }
        let port = try #require(URLComponents(string: proxy.endpoint)?.port)  // started again there
        do {
            let env = try EndToEndTests.Environment.oneBroker(base: base, server: moto, bucket: "out", logger: logger)
            try await Boto3(moto)("create-bucket", "out")
            try env.cluster.createTopic(Topics().table("posts"), partitions: 2)
            // 4 MiB/s: the 24 MiB upload is still running when the store goes away.
            let worker = try WorkerCommandLine(
                bootstrapServers: env.cluster.bootstrapServers, storage: .s3(endpoint: proxy.endpoint), dataRoot: env.dataRoot,
                stateDirectory: base.appendingPathComponent("state"), logLevel: "debug",
                extra: ["--http-address", "127.0.0.1:0", "--max-transfers", "4", "--bandwidth-limit", "4MiB", "--table", "posts:id",
                        "--https-sources", "--https-source-allow-range", "127.0.0.0/8"])
                .start(name: "outage-worker", environment: moto.clientEnvironment, logDirectory: base)
            let http = try await worker.workerHTTPEndpoint()
            #expect(await eventually(timeout: 60) { await curl("\(http)/readyz").status == 200 }, "\(worker.log.suffix(2000))")
            func upload(_ id: String, _ file: URL, options: String = "") async throws {
                try await env.kcat.produce(topic: "ferry.requests", key: "out/\(id)", value: """
                    {"id":"\(id)","op":"upload","bucket":"out","key":"\(id).bin","source":"\(file.absoluteString)"\(options)}
                    """)
            }
            // A source that gives no answer while the store does: that transfer's own failure, no outage.
            try await env.kcat.produce(topic: "ferry.requests", key: "out/dead-source", value: """
                {"id":"dead-source","op":"upload","bucket":"out","key":"dead-source.bin","source":"https://127.0.0.1:\(TestPaths.freePort())/x"}
                """)
            let deadSource = try await env.terminalStatus(of: "dead-source", timeout: 60)
            #expect(deadSource?.state == .failed && deadSource?.error?.code == "ConnectionError"
                    && deadSource?.error?.message.contains("storage unreachable") == false, "\(String(describing: deadSource))")
            #expect(await curl("\(http)/readyz").status == 200)
            #expect(!worker.log.contains("runs again when storage answers"), "it ran once: \(worker.log.suffix(2000))")
            let big = env.dataRoot.appendingPathComponent("big.bin")
            try Data((0..<(24 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 11) }).write(to: big)
            // One part at a time (2 s each at 4 MiB/s): the store goes down after the first, under the second.
            try await upload("big", big, options: #","options":{"partConcurrency":1}"#)
            #expect(try await eventually(timeout: 60, every: 0.1) { proxy.uploadedParts >= 1 }, "\(worker.log.suffix(2000))")
            _ = await proxy.process.stop(signal: SIGKILL)

            var small: [String: Data] = [:]
            for n in 0..<6 {
                let bytes = Data("outage \(n) ".utf8) + Data(repeating: UInt8(n), count: 10_000 + n)
                let file = env.dataRoot.appendingPathComponent("small-\(n).bin")
                try bytes.write(to: file)
                small["small-\(n)"] = bytes
                try await upload("small-\(n)", file)
            }
            try await upload("impatient", env.dataRoot.appendingPathComponent("small-0.bin"), options: #","options":{"timeoutSeconds":3}"#)
            // A record whose file is uploaded first waits the same way.
            try await env.kcat.produce(topic: "ferry.requests", key: "tables/posts/p1", value: """
                {"id":"item-1","op":"putItem","table":"posts","item":{"id":"p1","title":"outage","picture":{"bucket":"out",\
                "key":"posts/p1.bin","region":"us-east-1","localUri":"\(env.dataRoot.appendingPathComponent("small-1.bin").path)"}}}
                """)

            // The worker says why it is not ready, and the impatient request fails with the store's error.
            #expect(await eventually(timeout: 30) { await curl("\(http)/readyz").body.contains("unreachable") }, "\(worker.log.suffix(2000))")
            let impatient = try await env.terminalStatus(of: "impatient", timeout: 60)
            #expect(impatient?.state == .failed && impatient?.error?.code == "ConnectionError"
                    && impatient?.error?.message.contains("storage unreachable for the transfer's timeout (3 s)") == true,
                    "\(String(describing: impatient))")
            // Nothing else ends while the store is away, however long it is away.
            try await Task.sleep(for: .seconds(6))
            let meanwhile = try await env.statuses().filter { $0.state.isTerminal && !["impatient", "dead-source"].contains($0.id) }
            #expect(meanwhile.isEmpty, "\(meanwhile)")

            proxy = try await FaultProxy.start(upstream: moto.endpoint, rate: 0, logRequests: true, port: port, in: base)
            for id in ["big", "item-1"] + small.keys.sorted() {
                let status = try await env.terminalStatus(of: id, timeout: 90)
                #expect(status?.state == .completed, "\(id): \(String(describing: status))\n\(worker.log.suffix(3000))")
            }
            #expect(try await env.terminalStatus(of: "big")?.attempt ?? 0 >= 2, "the cut upload ran again")
            // Continued, not started over: three parts stored in all (a restart would send the first again).
            #expect(proxy.uploadedParts == 3, "\(proxy.injected.filter { $0.contains("partNumber=") })")
            #expect(await eventually(timeout: 30) { await curl("\(http)/readyz").status == 200 })
            let log = worker.log
            #expect(log.contains("storage unreachable") && log.contains("storage answers again after"), "\(log.suffix(3000))")
            #expect(await curl("\(http)/metrics").body.contains("ferry_storage_outages_total 1"))
            // What was stored is what was sent: the big upload's parts before and after the outage make one whole object.
            let out = base.appendingPathComponent("big-back.bin")
            let head = try await Boto3(moto).get(bucket: "out", key: "public/big.bin", to: out)
            #expect(head.ContentLength == 24 << 20 && head.ETag.hasSuffix("-3\""), "\(head)")
            #expect(try Data(contentsOf: out) == Data(contentsOf: big))
            for (id, bytes) in small {
                let file = base.appendingPathComponent("\(id)-back.bin")
                _ = try await Boto3(moto).get(bucket: "out", key: "public/\(id).bin", to: file)
                #expect(try Data(contentsOf: file) == bytes, "\(id)")
            }
            let file = base.appendingPathComponent("p1-back.bin")
            _ = try await Boto3(moto).get(bucket: "out", key: "public/posts/p1.bin", to: file)
            #expect(try Data(contentsOf: file) == small["small-1"])
            _ = await worker.stop()
        } catch {
            await proxy.process.stop(); await moto.stop()
            throw error
        }
        await proxy.process.stop()
        await moto.stop()
        try? FileManager.default.removeItem(at: base)
    }

    /// A store that takes connections and then never answers: the first
    /// request waits out one low-speed cut-off (30 s, which curl ends after
    /// about 37 s), the probe after it its 10 s limit, and the transfer waits
    /// for the store without a retry. It used to spend four cut-offs and a
    /// 30 s probe first (about 3 minutes). Stopped then, the worker hands the
    /// transfer off at once instead of holding it for its shutdown grace.
    @Test func aStoreThatFallsSilentIsWaitedForAfterOneCutOff() async throws {
        let fleet = try BareFleet("silent", logger: logger)
        defer { try? FileManager.default.removeItem(at: fleet.base) }
        // It answers every request (the worker's probes; 404 to the rest) until the first PUT; from then on it is silent.
        let silent = SharedCounter(), puts = SharedCounter()
        let store = try HTTPAnswerer { request in
            if request.hasPrefix("PUT ") { puts.add(); silent.add() }
            if silent.value > 0 { return ("", .silence) }
            if request.hasPrefix("GET / ") { return ("HTTP/1.1 200 OK", .fixed(Array("<ListAllMyBucketsResult/>".utf8))) }
            return ("HTTP/1.1 404 Not Found", .fixed([]))
        }
        let worker = try fleet.worker("silent-worker", store: "http://127.0.0.1:\(store.port)", extra: ["--http-address", "127.0.0.1:0"])
        let http = try await worker.workerHTTPEndpoint()
        #expect(await eventually(timeout: 60) { await curl("\(http)/readyz").status == 200 }, "\(worker.log.suffix(2000))")
        try await fleet.upload("q")
        let started = ContinuousClock.now
        #expect(await eventually(timeout: 120) { worker.log.contains("runs again when storage answers") }, "\(worker.log.suffix(3000))")
        print("a store fallen silent was waited for after \(ContinuousClock.now - started)")
        let log = worker.log
        #expect(puts.value == 1 && !log.contains("retrying PutObject"), "\(puts.value) PUTs: \(log.suffix(3000))")
        #expect(await curl("\(http)/readyz").status == 503)
        let ended = try await fleet.kcat.consumeAll(topic: "ferry.status").filter { $0.value.contains(#""failed""#) }
        #expect(ended.isEmpty, "\(ended)")
        // Stopped now, the worker hands the waiting transfer off at once: it could not
        // finish in its --shutdown-grace (30 s) while the store is down.
        let stopping = ContinuousClock.now
        let status = await worker.stop(timeout: 40)
        let stopTook = ContinuousClock.now - stopping
        #expect(status == 0 && stopTook < .seconds(20), "exit \(status) after \(stopTook): \(worker.log.suffix(2000))")
        #expect(worker.log.contains("storage unreachable at shutdown: handing off the transfer at offset 0 at once")
                && worker.log.contains("upload stopped and left for redelivery"), "\(worker.log.suffix(2000))")
    }

    /// A rebalance while the store is down: the transfers on the partitions
    /// that move wait for the store, and none could finish in the rebalance's
    /// grace, so they are handed off at once, the ones waiting before they
    /// started too (they were not found before: they went on waiting, and ran
    /// on the old owner besides the new one once the store came back).
    @Test func aRebalanceWhileTheStoreIsDownHandsOffTheWaitingTransfersAtOnce() async throws {
        let fleet = try BareFleet("rebalance-down", logger: logger)
        defer { try? FileManager.default.removeItem(at: fleet.base) }
        let deadStore = "http://127.0.0.1:\(TestPaths.freePort())"  // nothing listens: refused
        let first = try fleet.worker("first", store: deadStore)
        #expect(await eventually(timeout: 60) { first.log.contains("partitions assigned: ferry.requests/0, ferry.requests/1") },
                "\(first.log.suffix(2000))")
        for partition in 0..<2 { try await fleet.upload("w\(partition)", partition: partition) }
        #expect(await eventually(timeout: 60) { first.log.components(separatedBy: "waits for storage before it runs").count == 3 },
                "\(first.log.suffix(2000))")
        let second = try fleet.worker("second", store: deadStore)
        let started = ContinuousClock.now
        // One partition moves: its transfer is handed off without the 10 s grace.
        #expect(await eventually(timeout: 60) { first.log.contains("upload stopped and left for redelivery") }, "\(first.log.suffix(3000))")
        print("a transfer waiting for the store was handed off \(ContinuousClock.now - started) after the second worker started")
        #expect(first.log.contains("storage unreachable, so none waits"), "\(first.log.suffix(3000))")
        // The new owner takes it up, and waits for the store too.
        #expect(await eventually(timeout: 60) { second.log.contains("waits for storage before it runs") }, "\(second.log.suffix(3000))")
        let failed = try await fleet.kcat.consumeAll(topic: "ferry.status").filter { $0.value.contains(#""failed""#) }
        #expect(failed.isEmpty, "\(failed)")
        _ = await second.stop()
        _ = await first.stop()
    }

    /// The admin API reaches a transfer that waits for the store before it
    /// started (it is in the engine's map while it waits): a cancel ends it
    /// as `cancelled` at once, with nothing sent to the store; a pause holds
    /// it (`paused` status and state), and after the resume it waits for the
    /// store again, failing nothing.
    @Test func theAdminAPISteersATransferWaitingForTheStore() async throws {
        let fleet = try BareFleet("admin-waiting", logger: logger)
        defer { try? FileManager.default.removeItem(at: fleet.base) }
        let token = "outage-admin-\(UUID().uuidString)"
        let tokenFile = fleet.base.appendingPathComponent("admin-token")
        try (token + "\n").write(to: tokenFile, atomically: true, encoding: .utf8)
        let admin = "Authorization: Bearer \(token)"
        func post(_ url: String) async -> (status: Int, body: String) { await curl("-X", "POST", "-H", admin, url) }
        func get(_ url: String) async -> String { await curl("-H", admin, url).body }
        func statuses(_ id: String) async throws -> [String] { try await fleet.states(of: id) }
        let deadStore = "http://127.0.0.1:\(TestPaths.freePort())"  // nothing listens: refused
        let worker = try fleet.worker("steered", store: deadStore,
                                      extra: ["--http-address", "127.0.0.1:0", "--admin-token-file", tokenFile.path])
        let http = try await worker.workerHTTPEndpoint()
        for id in ["to-cancel", "to-pause"] { try await fleet.upload(id) }
        #expect(await eventually(timeout: 60) { worker.log.components(separatedBy: "waits for storage before it runs").count == 3 },
                "\(worker.log.suffix(2000))")

        let cancel = await post("\(http)/transfers/to-cancel/cancel")
        #expect(cancel.status == 202, "\(cancel.body)")
        #expect(try await eventually(timeout: 30) { try await statuses("to-cancel").last == "cancelled" }, "\(worker.log.suffix(2000))")
        #expect(await post("\(http)/transfers/to-cancel/cancel").status == 404, "no longer running")
        #expect(await get("\(http)/transfers/to-cancel").contains(#""state":"cancelled""#))

        let pause = await post("\(http)/transfers/to-pause/pause")
        #expect(pause.status == 202 && pause.body.contains(#""state":"paused""#), "\(pause.body)")
        #expect(try await eventually(timeout: 30) { try await statuses("to-pause").last == "paused" })
        #expect(await get("\(http)/transfers/to-pause").contains(#""state":"paused""#))
        let waitsBefore = worker.log.components(separatedBy: "waits for storage before it runs").count
        #expect(await post("\(http)/transfers/to-pause/resume").status == 202)
        // Resumed, it tries the store, finds it down, and waits again.
        #expect(await eventually(timeout: 60) { worker.log.components(separatedBy: "waits for storage before it runs").count > waitsBefore },
                "\(worker.log.suffix(3000))")
        let states = try await statuses("to-pause")
        #expect(!states.contains("failed") && !states.contains("cancelled") && states.last == "running", "\(states)")
        #expect(await get("\(http)/transfers/to-pause").contains(#""state":"running""#))
        _ = await worker.stop()
    }
}
