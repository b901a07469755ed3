@testable import FerryClient
import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// What a producer gets beyond enqueue (TransferUtility's tasks): the fleet's
/// transfer list, results of transfers that already ended, pause/resume/
/// cancel with typed results, completion callbacks (a reply topic, a signed
/// HTTPS POST, a dead letter when the endpoint never answers), and uploads of
/// in-memory bytes through Kafka.
@Suite(.serialized) struct TransferClientTests {
    let logger = Logger(label: "test.client")

    struct Setup {
        var env: EndToEndTests.Environment
        var base: URL
        var client: TransferClient

        func worker(_ name: String, extra: [String] = []) throws -> BackgroundProcess {
            try WorkerCommandLine(bootstrapServers: env.cluster.bootstrapServers, storage: .s3(endpoint: env.server.endpoint), dataRoot: env.dataRoot,
                                  stateDirectory: base.appendingPathComponent("state-\(name)"), workerId: name, extra: extra)
                .start(name: name, environment: env.server.clientEnvironment, logDirectory: base)
        }

        func file(_ name: String, bytes: Int) throws -> URL {
            let url = env.dataRoot.appendingPathComponent(name)
            try Data((0..<bytes).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ bytes) }).write(to: url)
            return url
        }
    }

    func withSetup(_ label: String, _ body: (Setup) async throws -> Void) async throws {
        let base = try TestPaths.temporaryDirectory("client-\(label)")
        try await MotoServer.start(logDirectory: base).stopAfter { moto in
            let env = try EndToEndTests.Environment.oneBroker(base: base, server: moto, bucket: "cli", logger: logger)
            try await Boto3(moto)("create-bucket", "cli")
            let client = try TransferClient(bootstrapServers: env.cluster.bootstrapServers, logger: logger)
            try await body(Setup(env: env, base: base, client: client))
        }
        try? FileManager.default.removeItem(at: base)
    }

    @Test func fleetListResultsAndControlsFromTheClient() async throws {
        try await withSetup("list") { s in
            let slow = ["--bandwidth-limit", "1MiB", "--max-transfers", "2"]
            let a = try s.worker("w-a", extra: slow), b = try s.worker("w-b", extra: slow)
            // Both in the group, one request partition each.
            #expect(await eventually(timeout: 60) {
                a.log.contains("partitions assigned: ferry.requests/") && b.log.contains("partitions assigned: ferry.requests/")
            }, "w-a: \(a.log.suffix(1500))\nw-b: \(b.log.suffix(1500))")
            // Twelve keys, seven on one partition and five on the other (a key's partition is the CRC32 of
            // "cli/l-N.bin"): each worker stays busy for many seconds, so a listing catches both at work
            // even when it takes seconds to read the status topic (with one key on a side, it could miss it).
            let source = try s.file("six.bin", bytes: 4 << 20)
            for n in 1...12 {
                try await s.client.enqueue(.upload(id: "l-\(n)", from: source.absoluteString, to: "cli", key: "l-\(n).bin"))
            }
            var running: [TransferStatus] = []
            let both = await eventually(timeout: 60) {
                running = (try? await s.client.list(states: [.running])) ?? []
                return Set(running.compactMap(\.worker)) == ["w-a", "w-b"]
            }
            let everything = (try? await s.client.list()) ?? []
            #expect(both, "\(running.map { "\($0.id)@\($0.worker ?? "-")" }) all: \(everything.map { "\($0.id)=\($0.state.rawValue)@\($0.worker ?? "-")" })")
            // The command line shows the same, from any machine.
            let out = try await s.env.ferry(["transfers", "--state", "running,paused"])
            #expect(out.contains("w-a") && out.contains("w-b") && out.contains("running"), "\(out)")

            // Pause and cancel from the client; typed results. The transfer is one running now, the one
            // with the most left to do: under load, reading the listings above outlasted l-1's upload once.
            var target: String?
            #expect(await eventually(timeout: 60) {
                target = ((try? await s.client.list(states: [.running])) ?? []).filter { $0.id.hasPrefix("l-") }
                    .min { ($0.bytesTransferred ?? 0) < ($1.bytesTransferred ?? 0) }?.id
                return target != nil
            })
            let paused = try #require(target)
            try await s.client.pause(id: paused)
            #expect(await eventually(timeout: 20) { (try? await s.client.status(of: paused)?.state) == .paused })
            try await s.client.cancel(id: paused)
            let cancelled = try await s.client.result(of: paused, timeout: 60)
            guard case .cancelled(let why)? = cancelled.result else { Issue.record("\(paused): \(cancelled)"); return }
            #expect(why.code == .cancelled)
            let others = (1...12).map { "l-\($0)" }.filter { $0 != paused }
            for id in others {
                let done = try await s.client.result(of: id, timeout: 180)
                guard case .completed(let object)? = done.result else { Issue.record("\(id): \(done)"); continue }
                #expect(object?.key == "public/\(id).bin")
            }
            // A result asked for after the end is answered at once, from the table.
            let started = ContinuousClock.now
            let late = try await s.client.result(of: others[0], timeout: 10)
            #expect(late.state == .completed && ContinuousClock.now - started < .seconds(10))
            let finished = try await s.client.list(states: [.completed, .cancelled])
            #expect(Set(finished.map(\.id)).isSuperset(of: Set((1...12).map { "l-\($0)" })))
            await a.stop(); await b.stop()
        }
    }

    @Test func callbacksAreDeliveredOncePerOutcome() async throws {
        try await withSetup("callbacks") { s in
            // An HTTPS receiver with a certificate the worker is told to trust.
            let cert = s.base.appendingPathComponent("cert.pem"), key = s.base.appendingPathComponent("key.pem")
            try await runChecked("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                                             "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key.path, "-out", cert.path])
            let posts = s.base.appendingPathComponent("posts.jsonl")
            let receiver = try BackgroundProcess(name: "receiver", executable: "python3",
                                                 arguments: [TestPaths.python.appendingPathComponent("webhook_server.py").path, "0",
                                                             posts.path, "200", "--tls", cert.path, key.path],
                                                 logDirectory: s.base)
            defer { Task { await receiver.stop() } }
            let port = try await receiver.announcedPort(after: "listening on 127.0.0.1:")
            let secret = "callback-secret-0123456789abcdef"
            let secretFile = s.base.appendingPathComponent("callback.secret")
            try secret.write(to: secretFile, atomically: true, encoding: .utf8)
            let worker = try s.worker("w-cb", extra: ["--callback-secret-file", secretFile.path, "--callback-allow-range", "127.0.0.0/8",
                                                      "--ca-bundle", cert.path])
            let source = try s.file("cb.txt", bytes: 1000)
            var toTopic = TransferRequest.upload(id: "cb-topic", from: source.absoluteString, to: "cli", key: "cb-topic.txt")
            toTopic.callback = "kafka:app.replies"
            var toURL = TransferRequest.upload(id: "cb-https", from: source.absoluteString, to: "cli", key: "cb-https.txt")
            toURL.callback = "https://127.0.0.1:\(port)/ferry/done?token=abc"
            let closed = TestPaths.freePort()
            var unreachable = TransferRequest.upload(id: "cb-dead", from: source.absoluteString, to: "cli", key: "cb-dead.txt")
            unreachable.callback = "https://127.0.0.1:\(closed)/nobody"
            var refused = TransferRequest.upload(id: "cb-loop", from: source.absoluteString, to: "cli", key: "cb-loop.txt")
            refused.callback = "kafka:ferry.requests"
            for request in [toTopic, toURL, unreachable, refused] { try await s.client.enqueue(request) }

            #expect(try await s.client.result(of: "cb-topic", timeout: 60).state == .completed)
            #expect(try await s.client.result(of: "cb-https", timeout: 60).state == .completed)
            let loop = try await s.client.result(of: "cb-loop", timeout: 60)
            #expect(loop.state == .rejected && loop.error?.message.contains("one of Ferry's own") == true, "\(loop)")
            // The reply topic: exactly one message, the terminal status.
            #expect(await eventually(timeout: 30) { ((try? await s.env.kcat.consumeAll(topic: "app.replies")) ?? []).count == 1 })
            try await Task.sleep(for: .seconds(2))
            let replies = try await s.env.kcat.consumeAll(topic: "app.replies")
            try #require(replies.count == 1)
            let reply = try JSONDecoder().decode(TransferStatus.self, from: Data(replies[0].value.utf8))
            #expect(reply.id == "cb-topic" && reply.state == .completed && reply.object?.key == "public/cb-topic.txt")
            // The HTTPS endpoint: exactly one signed POST.
            func postsSeen() -> [[String: Any]] {
                ((try? String(contentsOf: posts, encoding: .utf8)) ?? "").split(separator: "\n")
                    .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            }
            #expect(await eventually(timeout: 30) { postsSeen().count == 1 })
            try await Task.sleep(for: .seconds(2))
            let seen = postsSeen()
            #expect(seen.count == 1, "\(seen)")
            if let post = seen.first, let headers = post["headers"] as? [String: String], let body = post["body"] as? String {
                let lowered = Dictionary(uniqueKeysWithValues: headers.map { ($0.key.lowercased(), $0.value) })
                #expect(post["path"] as? String == "/ferry/done?token=abc")
                #expect(lowered["ferry-transfer-id"] == "cb-https" && lowered["ferry-state"] == "completed")
                let signature = try #require(lowered["ferry-signature"])
                let parts = Dictionary(uniqueKeysWithValues: signature.split(separator: ",").map { item -> (String, String) in
                    let pair = item.split(separator: "=", maxSplits: 1); return (String(pair[0]), String(pair[1]))
                })
                // Checked with openssl, not with Ferry's own HMAC.
                let out = try await runChecked("openssl", ["dgst", "-sha256", "-hmac", secret],
                                               input: Data("\(parts["t"] ?? "").\(body)".utf8))
                let expected = out.split(separator: "=").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
                #expect(parts["v1"] == expected, "signature \(signature)")
                let status = try JSONDecoder().decode(TransferStatus.self, from: Data(body.utf8))
                #expect(status.id == "cb-https" && status.state == .completed)
            }
            // Nobody listens: retried, then one dead letter with the status and the reason.
            #expect(try await s.client.result(of: "cb-dead", timeout: 60).state == .completed)
            #expect(await eventually(timeout: 90) { ((try? await s.env.kcat.consumeAll(topic: "ferry.callbacks.dlq")) ?? []).count == 1 },
                    "\(worker.log.suffix(3000))")
            let dead = try await s.env.kcat.consumeAll(topic: "ferry.callbacks.dlq")
            #expect(dead.count == 1 && dead[0].headers.contains("ferry-attempts=6") && dead[0].value.contains("cb-dead"), "\(dead.map(\.headers))")
            #expect(worker.log.contains("not delivered after 6 attempt(s)"))
            await worker.stop()
        }
    }

    @Test func bytesWithoutASharedFilesystemGoThroughKafka() async throws {
        try await withSetup("claim") { s in
            let worker = try s.worker("w-claim")
            // 3 MiB from memory: 6 chunks, across the topic's partitions.
            let bytes = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: ($0 &* 31) ^ ($0 >> 11)) }
            let sent = try await s.client.uploadData(bytes, .upload(id: "claim-1", from: "", to: "cli", key: "memory.bin"))
            #expect(sent.source?.hasPrefix("kafka-chunks://ferry.uploads?") == true)
            let done = try await s.client.result(of: "claim-1", timeout: 60)
            #expect(done.state == .completed && done.object?.size == Int64(bytes.count), "\(done) \(worker.log.suffix(2000))")
            let copy = s.base.appendingPathComponent("memory.out")
            _ = try await Boto3(s.env.server).get(bucket: "cli", key: "public/memory.bin", to: copy)
            #expect(try Data(contentsOf: copy) == Data(bytes))
            // The command line does the same for a file the worker cannot see.
            let outside = s.base.appendingPathComponent("outside.txt")
            try Data("not under the worker's data root\n".utf8).write(to: outside)
            _ = try await s.env.ferry(["enqueue", "upload", "--bucket", "cli", "--key", "outside.txt", "--source", outside.path,
                                       "--through-kafka", "--id", "claim-2", "--wait", "--timeout", "60"])
            #expect(try await s.client.status(of: "claim-2")?.state == .completed)
            // Chunks of another transfer are refused (each chunk names its transfer).
            let borrowed = try ChunkedSource(parsing: try #require(sent.source))
            try await s.client.enqueue(.upload(id: "claim-3", from: borrowed.uri, to: "cli", key: "borrowed.bin"))
            let refused = try await s.client.result(of: "claim-3", timeout: 60)
            #expect(refused.state == .failed && refused.error?.message.contains("is not chunk") == true, "\(refused)")
            // Its own chunks with a digest that does not match them: BadDigest. Nothing stored either way.
            let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: s.env.cluster.bootstrapServers), logger: logger)
            let at = try await producer.sendReturningPosition(topic: "ferry.uploads", key: Array("claim-4/0".utf8), value: Array("forged".utf8))
            let forged = ChunkedSource(topic: "ferry.uploads", size: 6, sha256: String(repeating: "a", count: 64), chunkSize: 512 << 10,
                                       positions: [.init(partition: at.partition, offset: at.offset)])
            try await s.client.enqueue(.upload(id: "claim-4", from: forged.uri, to: "cli", key: "forged.bin"))
            let bad = try await s.client.result(of: "claim-4", timeout: 60)
            #expect(bad.state == .failed && bad.error?.code == "BadDigest", "\(bad)")
            // A chunk said to be past its partition's end, or on a partition the topic lacks, does not
            // exist: the request fails at once, without holding a transfer slot for the fetch's 120 s.
            let clock = ContinuousClock()
            for (id, partition, offset, says) in [("claim-5", at.partition, at.offset + 1_000, "past the partition's end"),
                                                  ("claim-6", Int32(999), Int64(0), "does not exist")] {
                let nowhere = ChunkedSource(topic: "ferry.uploads", size: 6, sha256: String(repeating: "a", count: 64), chunkSize: 512 << 10,
                                            positions: [.init(partition: partition, offset: offset)])
                let started = clock.now
                try await s.client.enqueue(.upload(id: id, from: nowhere.uri, to: "cli", key: "\(id).bin"))
                let failed = try await s.client.result(of: id, timeout: 90)
                #expect(failed.state == .failed && failed.error?.code == "NoSuchKey" && failed.error?.message.contains(says) == true, "\(failed)")
                #expect(clock.now - started < .seconds(60), "\(id) took \(clock.now - started); the fetch's timeout is 120 s")
            }
            // A claim check on another topic the worker reads (here the statuses), even with the
            // right digest and key: refused, the worker reads claim checks from its uploads topic only.
            let elsewhere = try await producer.sendReturningPosition(topic: "ferry.status", key: Array("claim-7/0".utf8),
                                                                     value: Array("status".utf8))
            let offTopic = ChunkedSource(topic: "ferry.status", size: 6, sha256: SHA256Hex.of(Array("status".utf8)), chunkSize: 512 << 10,
                                         positions: [.init(partition: elsewhere.partition, offset: elsewhere.offset)])
            try await s.client.enqueue(.upload(id: "claim-7", from: offTopic.uri, to: "cli", key: "claim-7.bin"))
            let offTopicResult = try await s.client.result(of: "claim-7", timeout: 60)
            #expect(offTopicResult.state == .failed && offTopicResult.error?.code == "ForbiddenSource"
                    && offTopicResult.error?.message.contains("read from ferry.uploads only") == true, "\(offTopicResult)")
            for key in ["borrowed.bin", "forged.bin", "claim-5.bin", "claim-6.bin", "claim-7.bin"] {
                #expect((try? await Boto3(s.env.server)("head", "cli", "public/\(key)")) == nil)
            }
            await worker.stop()
        }
    }
}
