import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// Thousands of generated hostile requests through a real worker, checked
/// against invariants rather than expected codes:
/// - the worker never exits;
/// - every message has an outcome someone can see (a terminal status, or a
///   DLQ record naming its partition and offset);
/// - nothing is written outside the data root, outside the request's bucket
///   and access-level prefix, or over another identity's objects;
/// - keys are stored exactly as the request gave them, under their prefix;
/// - no injected header or metadata reaches storage;
/// - valid requests interleaved with the hostile ones complete.
///
/// `FERRY_FUZZ_SEED` replays a run; `FERRY_FUZZ_MESSAGES` sets its size
/// (default 600 on moto and 200 on Ceph's gateway; the long run is 5000).
@Suite(.serialized) struct AdversarialSuiteTests {
    let logger = Logger(label: "test.fuzz")

    static var seed: UInt64 { FuzzReplay.seed }
    static func count(default value: Int) -> Int { FuzzReplay.messages(default: value) }

    @Test func hostileRequestsOnMoto() async throws {
        try await MotoServer.start(logDirectory: try TestPaths.temporaryDirectory("fuzz-moto")).stopAfter { moto in try await run(moto, seed: Self.seed, messages: Self.count(default: 600)) }
    }

    @Test(.enabled(if: CephGateway.isInstalled || ProcessInfo.processInfo.environment["CI"] != nil))
    func hostileRequestsOnCephGateway() async throws {
        try await CephGateway.start().stopAfter { rgw in try await run(rgw, seed: Self.seed &+ 1, messages: Self.count(default: 200)) }
    }

    struct Stored: Decodable {
        var ETag: String
        var Metadata: [String: String]
        var CacheControl: String?
        var ContentType: String?
    }

    func run(_ server: any S3TestServer, seed: UInt64, messages total: Int) async throws {
        print("adversarial suite on \(server.name): seed \(seed), \(total) messages (replay with FERRY_FUZZ_SEED=\(seed) FERRY_FUZZ_MESSAGES=\(total))")
        let base = try TestPaths.temporaryDirectory("fuzz-\(server.name)")
        let dataRoot = base.appendingPathComponent("data")
        let outside = base.appendingPathComponent("outside")
        let sandbox = HostileRequestGenerator.Sandbox(dataRoot: dataRoot, outside: outside, bucket: "fuzz", victimBucket: "victim",
                                                      validSource: dataRoot.appendingPathComponent("in.txt"))
        let fm = FileManager.default
        for dir in [dataRoot.appendingPathComponent("traps/dir"), dataRoot.appendingPathComponent("out"), outside] {
            try fm.createDirectory(at: dir, withIntermediateDirectories: true)
        }
        #expect(mkfifo(sandbox.fifo.path, 0o644) == 0)
        try fm.createSymbolicLink(at: sandbox.linkOut, withDestinationURL: outside)
        try Data("valid source bytes\n".utf8).write(to: sandbox.validSource)
        try Data("outside the data root\n".utf8).write(to: sandbox.victimFile)
        let outsideBefore = try Self.snapshot(outside)

        let s3 = Boto3(server)
        for bucket in ["fuzz", "victim"] { try await s3("create-bucket", bucket) }
        for (bucket, key) in [("fuzz", "protected/alice/doc.txt"), ("fuzz", "private/alice/secret.txt"), ("victim", "secret.txt"),
                              ("fuzz", "public/fz/seed.txt")] {
            try await s3("put", bucket, key, sandbox.victimFile.path)
        }
        let before = try await Self.everything(server)

        // librdkafka's mock broker keeps at most 5 MiB per partition (older messages are
        // dropped): compressed batches and 8 partitions keep the near-1 MB messages within it.
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
        for topic in Topics().all + [Topics().table("fzposts")] { try cluster.createTopic(topic, partitions: 8) }
        let kafka = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers, ["compression.type": "lz4"])
        let worker = try WorkerCommandLine(
            bootstrapServers: cluster.bootstrapServers, storage: .s3(endpoint: server.endpoint), dataRoot: dataRoot,
            stateDirectory: base.appendingPathComponent("state"),
            extra: ["--max-transfers", "16", "--https-sources", "--shutdown-grace", "5", "--table", "fzposts:id",
                    "--kafka-property", "compression.type=lz4"])
            .start(name: "worker-fuzz", environment: server.clientEnvironment, logDirectory: base)

        // Generate and produce.
        var generator = HostileRequestGenerator(seed: seed, sandbox: sandbox)
        let generated = (0..<total).map { _ in generator.next() }
        let producer = try KafkaProducer(configuration: kafka, logger: logger)
        for chunk in stride(from: 0, to: generated.count, by: 200) {
            let slice = generated[chunk..<min(chunk + 200, generated.count)]
            let results = await producer.sendAll(slice.map { OutgoingMessage(topic: "ferry.requests", key: $0.key, value: $0.value) })
            let refused = zip(slice, results).filter { if case .failure = $1 { true } else { false } }
            #expect(refused.isEmpty, "could not produce: \(refused.map { "\($0.value.count) bytes (\($0.mutations)): \($1)" })")
        }
        let requests = try await KafkaConsumer.snapshot(topic: "ferry.requests", configuration: kafka, timeout: 60, logger: logger)
        #expect(requests.count == total)

        // Wait for an outcome for every message (by its id, or by its partition and offset).
        // Ids may repeat (a mutation can give two messages one id): keep every terminal state per id.
        var terminalStates: [String: Set<TransferStatus.State>] = [:]
        func outcomes() async throws -> (statuses: [String: TransferStatus], dlq: [String: KafkaMessage]) {
            let statuses = try await KafkaConsumer.snapshot(topic: "ferry.status", configuration: kafka, timeout: 60, logger: logger)
                .compactMap { try? JSONDecoder().decode(TransferStatus.self, from: Data($0.value)) }.filter { $0.state.isTerminal }
            let dlq = try await KafkaConsumer.snapshot(topic: "ferry.requests.dlq", configuration: kafka, timeout: 60, logger: logger)
            terminalStates = Dictionary(grouping: statuses, by: \.id).mapValues { Set($0.map(\.state)) }
            return (Dictionary(statuses.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first }),
                    Dictionary(dlq.map { ("\($0.header(DLQHeader.sourcePartition) ?? "?")/\($0.header(DLQHeader.sourceOffset) ?? "?")", $0) },
                               uniquingKeysWith: { first, _ in first }))
        }
        func missing(_ o: (statuses: [String: TransferStatus], dlq: [String: KafkaMessage])) -> [KafkaMessage] {
            requests.filter { r in
                o.dlq["\(r.partition)/\(r.offset)"] == nil && (RequestDecoder.idHint(r.value).flatMap { o.statuses[$0] } == nil)
            }
        }
        // Waits while outcomes keep coming: a stall (no new outcome for 150 s, longer than any
        // of the worker's own bounds, such as a chunk fetch's 120 s) ends the
        // wait, a slow machine does not (CI runs this beside five other integration tests).
        var seen = try await outcomes()
        var unansweredCount = missing(seen).count
        var lastProgress = Date()
        let cap = Date().addingTimeInterval(900)
        while unansweredCount > 0 && Date().timeIntervalSince(lastProgress) < 150 && Date() < cap && worker.isRunning {
            try await Task.sleep(for: .seconds(2))
            seen = try await outcomes()
            let now = missing(seen).count
            if now < unansweredCount { lastProgress = Date() }
            unansweredCount = now
        }

        // 1. The worker never exited.
        #expect(worker.isRunning, "seed \(seed): the worker exited\n\(worker.log.suffix(4000))")
        #expect(!worker.log.contains("Fatal error"), "seed \(seed): a trap\n\(worker.log.suffix(4000))")
        // 2. Every message has an outcome.
        let unanswered = missing(seen)
        #expect(unanswered.isEmpty, "seed \(seed): \(unanswered.count) messages without an outcome (the last new one \(Int(Date().timeIntervalSince(lastProgress))) s ago), e.g. \(unanswered.prefix(3).map { String(decoding: $0.value.prefix(300), as: UTF8.self) })")
        // 3. Valid requests interleaved with hostile ones completed.
        let valid = generated.filter(\.isValid)
        for message in valid {
            let status = seen.statuses[message.id!]
            #expect(status?.state == .completed, "seed \(seed): valid \(message.id!) ended \(String(describing: status?.state)) \(status?.error?.message ?? "")")
        }
        // 4. Nothing outside the data root changed; nothing new appeared beside it.
        #expect(try Self.snapshot(outside) == outsideBefore, "seed \(seed): outside the data root changed")
        let beside = Set(try fm.contentsOfDirectory(atPath: base.path))
        #expect(beside.isSubset(of: ["data", "outside", "state", "worker-fuzz.log"]), "seed \(seed): \(beside)")
        #expect(!fm.fileExists(atPath: "/nonexistent-ferry-fuzz"))
        // 5. Storage: no new bucket, victims untouched, every new object where its completed request put it, literally.
        let after = try await Self.everything(server)
        #expect(Set(after.keys) == Set(before.keys), "seed \(seed): buckets \(after.keys.sorted())")
        for (bucket, key) in [("fuzz", "protected/alice/doc.txt"), ("fuzz", "private/alice/secret.txt"), ("victim", "secret.txt")] {
            #expect(after[bucket]?[key]?.ETag == before[bucket]?[key]?.ETag, "seed \(seed): \(bucket)/\(key) changed or vanished")
        }
        let completedWrites = seen.statuses.values.filter { $0.state == .completed && ($0.op == "upload" || $0.op == "copy") }
        // What requests that were not refused asked to write (a write may also end `failed`,
        // e.g. by its timeout after S3 stored it: it was still authorised).
        var authorised: Set<String> = []
        for message in generated {
            // An item request's files, when it was not refused.
            if case .success(.item(let item)) = RequestDecoder.decodeAny(message.value),
               terminalStates[item.id]?.contains(where: { $0 != .rejected }) == true {
                for file in item.files {
                    let upload = TransferRequest(id: item.id, op: .upload, bucket: file.bucket, key: file.key, accessLevel: item.accessLevel,
                                                 identityId: item.identityId, source: file.source)
                    if let key = try? DefaultPrefixResolver().objectKey(for: upload) { authorised.insert("\(file.bucket)/\(key)") }
                }
            }
            guard case .success(let request) = RequestDecoder.decode(message.value), request.op == .upload || request.op == .copy,
                  terminalStates[request.id]?.contains(where: { $0 != .rejected }) == true,
                  let key = try? DefaultPrefixResolver().objectKey(for: request) else { continue }
            authorised.insert("\(request.bucket)/\(key)")
        }
        let requestsById = Dictionary(generated.compactMap { m in m.id.map { ($0, m) } }, uniquingKeysWith: { a, _ in a })
        for status in completedWrites {
            guard let message = requestsById[status.id], case .success(let request) = RequestDecoder.decode(message.value) else { continue }
            let expected = try DefaultPrefixResolver().objectKey(for: request)
            #expect(status.object?.key == expected && status.object?.bucket == request.bucket,
                    "seed \(seed): \(status.id) stored at \(status.object?.bucket ?? "-")/\(status.object?.key ?? "-"), asked for \(request.bucket)/\(expected)")
        }
        for (bucket, objects) in after {
            for (key, object) in objects where before[bucket]?[key] == nil {
                #expect(ObjectKeyRule.violation(of: key) == nil, "seed \(seed): stored key \(key.debugDescription) breaks the key rule")
                // Under a level's prefix, and never in the area of the identity no request acts as.
                let parts = key.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)
                let underPrefix = parts.first == "public"
                    || (parts.count == 3 && ["protected", "private"].contains(parts[0]) && IdentityRule.violation(of: String(parts[1]), field: "") == nil
                        && parts[1] != "alice")
                #expect(underPrefix, "seed \(seed): \(bucket)/\(key.debugDescription) is outside every prefix a request could name")
                #expect(authorised.contains("\(bucket)/\(key)"), "seed \(seed): \(bucket)/\(key.debugDescription): no accepted request named it")
                // 6. No injected header or metadata.
                let names = Set(object.Metadata.keys)
                #expect(names.isSubset(of: ["note", "x", "camera", "ferry-transfer-id", "ferry-sequencer", "ferry-access-level", "ferry-owner"]),
                        "seed \(seed): \(key) carries metadata \(names.sorted())")
                for value in Array(object.Metadata.values) + [object.CacheControl, object.ContentType].compactMap({ $0 }) {
                    #expect(!value.contains("injected") && !value.contains("\r") && !value.contains("\n"), "seed \(seed): \(key): \(value.debugDescription)")
                }
            }
        }

        let codes = Dictionary(grouping: seen.dlq.values.compactMap { $0.header(DLQHeader.errorCode) }, by: { $0 }).mapValues(\.count)
        let states = Dictionary(grouping: seen.statuses.values.map(\.state.rawValue), by: { $0 }).mapValues(\.count)
        print("adversarial suite on \(server.name): seed \(seed): \(total) messages, \(valid.count) valid; worker exits 0; "
              + "unanswered \(unanswered.count); terminal statuses \(states.sorted { $0.key < $1.key }); "
              + "dead letters \(seen.dlq.count) by code \(codes.sorted { $0.key < $1.key }); outside-root changes 0; victims intact")
        // Within the worker's own bound (--shutdown-grace 5 + 30 s), which a CI run
        // beside five other integration tests can come near: its outbox drain and its
        // producer's flush have 10 s each. Past 30 s the stop prints the threads' stacks.
        let stopped = await worker.stop(timeout: 30)
        let stopLines = worker.log.split(separator: "\n").filter { $0.contains("stopped in") || $0.contains("shutdown") }
        print("adversarial suite on \(server.name): \(stopLines.joined(separator: "\n"))")
        #expect(stopped == 0, "seed \(seed): exit \(stopped)\n\(worker.log.suffix(3000))")
        try? fm.removeItem(at: base)
    }

    /// Relative path → content hash (or link target) of everything under `directory`.
    static func snapshot(_ directory: URL) throws -> [String: String] {
        var result: [String: String] = [:]
        let fm = FileManager.default
        for path in try fm.subpathsOfDirectory(atPath: directory.path) {
            let full = directory.appendingPathComponent(path).path
            if let target = try? fm.destinationOfSymbolicLink(atPath: full) {
                result[path] = "link:" + target
            } else if let data = fm.contents(atPath: full) {
                result[path] = data.base64EncodedString()
            } else {
                result[path] = "dir"
            }
        }
        return result
    }

    static func everything(_ server: any S3TestServer) async throws -> [String: [String: Stored]] {
        try JSONDecoder().decode([String: [String: Stored]].self, from: Data(try await Boto3(server)("list-all").utf8))
    }
}
