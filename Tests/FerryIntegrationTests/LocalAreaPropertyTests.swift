import FerryCore
import FerryKafka
import FerryS3
import FerryLocalStore
import FerryStorage
import FerryTestSupport
import Foundation
import JWTKit
import Logging
import Synchronization
import Testing

/// Local files inside the access model, as a property through a running
/// worker (`--auth-mode jwt`, so the data root is laid out by access level).
/// Alice, bob and an anonymous guest send uploads (their source is read) and
/// downloads (their destination written) naming files of every area, Ferry's
/// own directory, the root and the outside, each spelled a generated way:
/// `.` and `..` segments (climbing out of the root too), doubled slashes,
/// percent-encoding, detours through other areas; through symbolic links
/// and hard links into other areas; and through a directory that another
/// thread keeps swapping with a link to bob's private area while requests run.
///
/// Invariants, whatever the spelling:
/// - an upload that completes stored bytes of a file its caller may read
///   (public, anyone's protected, its own private area); never bob's private
///   file for another caller, the audit file, a file at the root or outside it;
/// - a download that completes wrote its file where its caller may write
///   (public, its own protected or private area), and nothing else changed:
///   every file that was there before is as it was;
/// - every refusal is `AccessDenied` or `InvalidPath`, and moved nothing;
/// - the plain spelling of an allowed file completes (the property is not met
///   by refusing everything).
/// Seeded: FERRY_FUZZ_SEED replays, FERRY_FUZZ_MESSAGES sets the count (default 600).
@Suite struct LocalAreaPropertyTests {
    let logger: Logger = {
        var logger = Logger(label: "test.areas")
        logger.logLevel = .critical
        return logger
    }()

    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// One generated request.
    struct Case: CustomStringConvertible {
        var id: String
        var caller: String
        var upload: Bool
        /// The path under the data root as spelled in the request, and what it means plainly.
        var spelled: String
        var plain: String
        /// The plain spelling of a file the caller may use: it must complete.
        var mustComplete: Bool
        var description: String { "\(id) \(caller) \(upload ? "upload from" : "download to") '\(spelled)' (\(plain))" }
    }

    @Test func localFilesStayInsideTheCallersAreas() async throws {
        let seed = FuzzReplay.seed, total = FuzzReplay.messages(default: 600)
        print("local areas: seed \(seed), \(total) requests (replay with FERRY_FUZZ_SEED=\(seed) FERRY_FUZZ_MESSAGES=\(total))")
        var rng = SeededGenerator(seed: seed)
        let base = try TestPaths.temporaryDirectory("areas")
        defer { try? FileManager.default.removeItem(at: base) }
        let (root, outside) = try LocalAreaTree.build(in: base)
        let before = try Self.snapshot(root, outside)

        // Storage: one object every download reads.
        let storeDirectory = base.appendingPathComponent("store")
        let store = try LocalObjectStore(root: storeDirectory)
        _ = try await store.putObject(PutObjectInput(bucket: "areas", key: "public/seed.bin"), body: .bytes(Array("downloaded bytes".utf8)))

        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
        for topic in Topics().all { try cluster.createTopic(topic, partitions: 4) }
        let secret = "local-areas-secret-0123456789abcdef"
        let secretFile = base.appendingPathComponent("jwt.secret")
        try Data(secret.utf8).write(to: secretFile)
        chmod(secretFile.path, 0o600)
        let keys = await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        let worker = try WorkerCommandLine(
            bootstrapServers: cluster.bootstrapServers, storage: .local(storeDirectory), dataRoot: root,
            stateDirectory: base.appendingPathComponent("state"), roles: "transfers",
            extra: ["--auth-mode", "jwt", "--jwt-secret-file", secretFile.path, "--allow-guests", "--max-transfers", "16"])
            .start(name: "worker-areas", logDirectory: base)
        #expect(await eventually(timeout: 60) { worker.log.contains("partitions assigned") }, "\(worker.log.suffix(2000))")

        let cases = Self.generate(total, root: root, using: &rng)
        let swapping = LocalAreaTree.Swapper(root.appendingPathComponent("public"))
        swapping.start()
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), logger: logger)
        for c in cases {
            var request: [String: Any] = ["id": c.id, "op": c.upload ? "upload" : "download", "bucket": "areas",
                                          "key": c.upload ? "up/\(c.id)" : "seed.bin"]
            if c.caller != "guest" {
                request["identityId"] = c.caller
                request["auth"] = try await keys.sign(Claims(sub: .init(value: c.caller), exp: .init(value: Date() + 900)))
            }
            request[c.upload ? "source" : "destination"] = "file://" + root.path + "/" + c.spelled
            try await producer.send(topic: "ferry.requests", key: "areas/\(c.id)",
                                    value: Array(try JSONSerialization.data(withJSONObject: request)))
        }

        var terminal: [String: TransferStatus] = [:]
        let kafka = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
        _ = await eventually(timeout: 240, every: 2) {
            for message in (try? await KafkaConsumer.snapshot(topic: "ferry.status", configuration: kafka, timeout: 60, logger: logger)) ?? [] {
                if let status = try? JSONDecoder().decode(TransferStatus.self, from: Data(message.value)), status.state.isTerminal {
                    terminal[status.id] = status
                }
            }
            return terminal.count >= cases.count
        }
        swapping.stop()
        #expect(terminal.count == cases.count, "\(terminal.count) of \(cases.count) requests ended: \(worker.log.suffix(2000))")

        // Where each download's file landed, found by its unique name.
        var landed: [String: [String]] = [:]
        for path in try Self.allFiles(under: base) where path.hasSuffix(".bin") {
            let name = (path as NSString).lastPathComponent
            landed[String(name.dropLast(4)), default: []].append(path)
        }
        let contents = Dictionary(uniqueKeysWithValues: (Array(LocalAreaTree.seeds.values) + [LocalAreaTree.outsideContent, "a fetched body"]).map { (Self.md5($0), $0) })
        var completed = 0, refused = 0
        for c in cases {
            guard let status = terminal[c.id] else { continue }
            if status.state == .completed {
                completed += 1
                if c.upload {
                    let content = contents[status.object?.eTag.map { $0.replacingOccurrences(of: "\"", with: "") } ?? ""]
                    #expect(content.map(LocalAreaTree.readable(by: c.caller).contains) == true,
                            "seed \(seed): \(c) stored '\(content ?? "unknown bytes")', which \(c.caller) may not read")
                } else {
                    let places = landed[c.id] ?? []
                    #expect(places.count == 1, "seed \(seed): \(c) completed, its file is at \(places)")
                    for place in places {
                        let real = URL(fileURLWithPath: place).resolvingSymlinksInPath().path
                        let components = real.hasPrefix(root.path + "/") ? real.dropFirst(root.path.count + 1).split(separator: "/").map(String.init) : []
                        #expect(LocalAreaTree.writable(components, by: c.caller), "seed \(seed): \(c) wrote \(real)")
                    }
                }
            } else {
                refused += 1
                #expect(c.mustComplete == false, "seed \(seed): \(c) was refused: \(status.error?.message ?? status.state.rawValue)")
                #expect(status.state == .rejected || status.state == .failed, "seed \(seed): \(c) ended \(status.state.rawValue)")
                #expect(["AccessDenied", "InvalidPath"].contains(status.error?.code ?? ""),
                        "seed \(seed): \(c) refused with \(status.error?.code ?? "-"): \(status.error?.message ?? "")")
                if !c.upload { #expect(landed[c.id] == nil, "seed \(seed): refused \(c) left \(landed[c.id] ?? [])") }
            }
        }
        let after = try Self.snapshot(root, outside)
        for (path, digest) in before { #expect(after[path] == digest, "seed \(seed): \(path) changed or went") }
        print("local areas: \(cases.count) requests, \(completed) completed, \(refused) refused; \(before.count) files before, none changed")
        #expect(completed > cases.count / 10 && refused > cases.count / 10, "the cases test little: \(completed) completed, \(refused) refused")
        await worker.stop()
    }

    // MARK: Generating

    static func generate(_ count: Int, root: URL, using rng: inout SeededGenerator) -> [Case] {
        let readTargets = LocalAreaTree.readTargets, writeDirectories = LocalAreaTree.writeDirectories
        var cases: [Case] = []
        for n in 0..<count {
            let caller = ["alice", "bob", "guest"].randomElement(using: &rng)!
            let upload = Int.random(in: 0..<5, using: &rng) < 3
            let id = "area-\(n)"
            let plain: String
            if upload {
                plain = readTargets.randomElement(using: &rng)!
            } else if Int.random(in: 0..<4, using: &rng) == 0 {
                // Over a file the caller may not write: none of them may change.
                let forbidden = ["audit/audit.jsonl", "top.txt", "../outside/o.txt", caller == "bob" ? "private/alice/a.txt" : "private/bob/secret.txt"]
                plain = forbidden.randomElement(using: &rng)!
            } else {
                let directory = writeDirectories.randomElement(using: &rng)!
                plain = (directory.isEmpty ? "" : directory + "/") + "\(id).bin"
            }
            let components = plain.split(separator: "/").map(String.init)
            // (bob's secret.txt has a second name, public/hard-bob: refused even to him.)
            let readsOwnFile = upload && (["public/p.txt", "protected/alice/a.txt", "protected/bob/b.txt"].contains(plain)
                                          || plain == "private/\(caller)/a.txt")
            let writesOwnArea = !upload && LocalAreaTree.writable(components, by: caller) && !plain.hasPrefix("public/dirlink")
                && !plain.hasPrefix("public/swap") && !plain.hasPrefix("private/carol")
            let spelled = PathSpelling.spell(components, using: &rng)
            cases.append(Case(id: id, caller: caller, upload: upload, spelled: spelled, plain: plain,
                              mustComplete: spelled == plain && (readsOwnFile || writesOwnArea)))
        }
        return cases
    }

    // MARK: Observing

    static func allFiles(under directory: URL) throws -> [String] {
        var files: [String] = []
        guard let walker = FileManager.default.enumerator(atPath: directory.path) else { return [] }
        for case let relative as String in walker {
            let path = directory.appendingPathComponent(relative).path
            var info = stat()
            if lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG { files.append(path) }
        }
        return files
    }

    /// Every regular file now under the data root and outside it, with an MD5 of its bytes.
    static func snapshot(_ root: URL, _ outside: URL) throws -> [String: String] {
        var digests: [String: String] = [:]
        for path in try allFiles(under: root) + allFiles(under: outside) where !path.hasSuffix(".bin") {
            digests[path] = md5(String(decoding: (try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data(), as: UTF8.self))
        }
        return digests
    }

    static func md5(_ text: String) -> String { Digest.md5(Array(text.utf8)).hexString }
}
