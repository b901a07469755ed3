import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// The token rule through running workers: four workers (an HMAC secret, an
/// RSA public key, an EC public key, a JWKS of both kinds), each sent 720
/// requests whose tokens pair every header algorithm with every signing key
/// and algorithm (`TokenForge.cases`). A request completes exactly when
/// `TokenForge.accepts` says; every other one is rejected `AccessDenied`.
/// Seeded: FERRY_TOKEN_SEED replays.
@Suite struct TokenAlgorithmWorkerTests {
    let logger: Logger = {
        var logger = Logger(label: "test.tokens")
        logger.logLevel = .critical
        return logger
    }()

    @Test func workersAcceptOnlyTokensWhoseAlgorithmTheirKeyAllows() async throws {
        let seed = ProcessInfo.processInfo.environment["FERRY_TOKEN_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64.max)
        var generator = SeededGenerator(seed: seed)
        let base = try TestPaths.temporaryDirectory("token-workers")
        let forge = try await TokenForge.make(directory: base)
        let workers = try forge.workers
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
        let kafka = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
        let producer = try KafkaProducer(configuration: kafka, logger: logger)
        var processes: [BackgroundProcess] = []
        var sent: [(worker: TokenForge.Worker, topics: Topics, cases: [String: TokenForge.Case])] = []
        for (index, worker) in workers.enumerated() {
            let topics = Topics(prefix: "tokens\(index)")
            for topic in topics.all { try cluster.createTopic(topic, partitions: 2) }
            let keyFile = base.appendingPathComponent("\(worker.name).key")
            try Data(worker.file.utf8).write(to: keyFile)
            chmod(keyFile.path, 0o600)
            let data = base.appendingPathComponent("data-\(worker.name)")
            try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
            processes.append(try WorkerCommandLine(
                bootstrapServers: cluster.bootstrapServers, storage: .local(base.appendingPathComponent("store-\(worker.name)")),
                dataRoot: data, stateDirectory: base.appendingPathComponent("state-\(worker.name)"), roles: "transfers",
                extra: ["--topic-prefix", topics.prefix, "--auth-mode", "jwt", worker.flag, keyFile.path])
                .start(name: "worker-\(worker.name)", logDirectory: base))
            var cases: [String: TokenForge.Case] = [:]
            for (n, c) in TokenForge.cases(using: &generator).enumerated() {
                let id = "tok-\(index)-\(n)"
                let request: [String: Any] = ["id": id, "op": "delete", "bucket": "photos", "key": "k\(n).txt", "accessLevel": "private",
                                              "identityId": "alice", "auth": try await forge.token(c, subject: "alice")]
                try await producer.send(topic: topics.requests, key: "photos/k\(n).txt",
                                        value: Array(try JSONSerialization.data(withJSONObject: request)))
                cases[id] = c
            }
            sent.append((worker, topics, cases))
        }

        var checked = 0, accepted = 0
        for (worker, topics, cases) in sent {
            var terminal: [String: TransferStatus] = [:]
            _ = await eventually(timeout: 180, every: 2) {
                let messages = (try? await KafkaConsumer.snapshot(topic: topics.status, configuration: kafka, timeout: 60, logger: logger)) ?? []
                for message in messages {
                    if let status = try? JSONDecoder().decode(TransferStatus.self, from: Data(message.value)), status.state.isTerminal {
                        terminal[status.id] = status
                    }
                }
                return terminal.count >= cases.count
            }
            #expect(terminal.count == cases.count, "\(worker.name): \(terminal.count) of \(cases.count) requests ended")
            for (id, c) in cases.sorted(by: { $0.key < $1.key }) {
                guard let status = terminal[id] else { continue }
                checked += 1
                if TokenForge.accepts(c, worker: worker) {
                    accepted += 1
                    #expect(status.state == .completed, "\(worker.name) refused \(c): \(status.error?.message ?? "") (FERRY_TOKEN_SEED=\(seed))")
                } else {
                    #expect(status.state == .rejected && status.error?.code == "AccessDenied",
                            "\(worker.name) gave \(status.state.rawValue) for \(c) (FERRY_TOKEN_SEED=\(seed))")
                }
            }
        }
        print("tokens through workers: \(checked) requests on 4 key setups, \(accepted) accepted (seed \(seed))")
        #expect(checked >= 1000)
        for process in processes { await process.stop() }
        try? FileManager.default.removeItem(at: base)
    }
}
