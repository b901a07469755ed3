import FerryTriggerKit
import ArgumentParser
import FerryCore
import FerryEngine
import FerryKafka
import FerryStore
import FerryWorker
import Foundation
import Logging
import Triggers

struct DevCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev",
        abstract: "Run Ferry on the embedded default: in-process Kafka (librdkafka's mock cluster), a local object store, a worker and the trigger dispatcher.",
        discussion: """
            Prints `Kafka bootstrap: <addresses>` so other clients (ferry enqueue, kcat) can reach the embedded cluster.
            The mock cluster keeps messages in memory only: it is for trying Ferry out and for tests.

            Examples:
              ferry dev --demo          # enqueue uploads and a download, show the trigger's output, exit
              ferry dev --http-address 127.0.0.1:9090   # also serve /metrics, /readyz, /transfers
              ferry dev                 # keep running; in another shell:
              ferry enqueue upload --bootstrap-servers <addresses> --bucket demo --key a.txt --source ferry-data/a.txt --wait
            """)

    @Flag(help: "Run a short demonstration through Kafka and exit (0 when every step worked).")
    var demo = false

    @Option(name: .customLong("data-root"), help: "Directory for file:// sources and destinations (default ./ferry-data).")
    var dataRoot = "ferry-data"

    @Option(name: .customLong("store-dir"), help: "Directory of the local object store (default ./.ferry/dev/objects).")
    var storeDir = ".ferry/dev/objects"

    @Option(name: .customLong("state-dir"), help: "Directory of the worker's SQLite state (default ./.ferry/dev/state).")
    var stateDir = ".ferry/dev/state"

    // One broker by default: the mock answers an empty fetch only at the end of
    // fetch.wait.max.ms, so each consumer polls every broker on its own; with 3
    // brokers S5's p99 was 165-239 ms against 115-167 with 1, and an idle `ferry
    // dev` used 8.6 % of a core against 5.9 % (Benchmarks/NOTES.md, 2026-12-04).
    @Option(help: "Brokers in the embedded cluster (more spread the partitions' leaders, at more CPU and latency).") var brokers = 1
    @Option(help: "Partitions per topic (default 16: the embedded Kafka keeps 5 MiB per partition).") var partitions = 16

    @Option(name: .customLong("log-level"), help: "Log level (default warning with --demo, info otherwise).")
    var logLevel: String?

    @Flag(name: .customLong("kafka-only"), help: "Run only the embedded Kafka cluster (for workers started separately, e.g. against a real S3).")
    var kafkaOnly = false

    @Option(name: .customLong("ingest-bucket"), parsing: .singleValue,
            help: "A bucket whose store notifications are taken on POST /notifications/s3, repeatable (default demo).")
    var ingestBuckets: [String] = []

    @Option(name: .customLong("http-address"), help: "HOST:PORT for /metrics, /healthz, /readyz and /transfers (the last with FERRY_ADMIN_TOKEN; default: none).")
    var httpAddress: String?

    /// `posts`, keyed by `id`; replaced and deleted posts' pictures are deleted.
    static let postsTable = TableDefinition(name: "posts", partitionKey: "id", deletesUnreferencedFiles: true)

    /// What the embedded cluster keeps, in requests a user can picture: a
    /// request of 4 KiB keyed by `bucket/key` (about 60 bytes).
    static func retentionNotice(partitions: Int) -> String {
        let perPartition = EmbeddedKafkaCluster.messagesKept(ofSize: 4096 + 60)
        return "Embedded Kafka keeps at most \(EmbeddedKafkaCluster.bytesKeptPerPartition >> 20) MiB of each partition "
            + "(\(partitions) partitions: about \(perPartition * partitions) unread requests of 4 KiB, \(perPartition) a partition, "
            + "when keyed by bucket/key as ferry enqueue and FerryClient do). Beyond that the oldest are dropped: "
            + "the worker that reads the partition logs each dropped range as an error and counts it in ferry_requests_lost_total."
    }

    func run() async throws {
        let logger = try LogOptions.bootstrap(label: "ferry.dev", level: logLevel ?? setting(.logLevel) ?? (demo ? "warning" : "info"),
                                              format: setting(.logFormat) ?? "text")
        // Refused before anything is created or started, as `ferry worker` refuses it.
        if let httpAddress { _ = try configured { try ListenAddress(parsing: httpAddress) } }
        try FileManager.default.createDirectory(atPath: dataRoot, withIntermediateDirectories: true)

        try requireRange(brokers, 1...16, "--brokers")
        try requireRange(partitions, 1...1024, "--partitions")
        // A second `ferry dev` in this directory stops here, before it starts a cluster or says it is ready.
        let stateLock = kafkaOnly ? nil : try StateDirectoryLock(directory: URL(fileURLWithPath: stateDir), holder: "ferry dev")
        let topics = Topics()
        let cluster = try EmbeddedKafkaCluster(brokers: brokers, logger: logger)
        for topic in topics.all { try cluster.createTopic(topic, partitions: partitions) }
        // The demo's record table (docs/producers/records.md).
        let tables = [DevCommand.postsTable]
        for table in tables { try cluster.createTopic(topics.table(table.name), partitions: partitions) }
        print("Kafka bootstrap: \(cluster.bootstrapServers)")
        print(Self.retentionNotice(partitions: partitions))
        flushStandardOutput()
        if kafkaOnly {
            try await runUntilSignalled(logger: logger) {
                while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
            }
            return
        }

        let root = try configured { try DataRoot(dataRoot) }
        if let problem = DataRootExposure.problem(dataRoot: root, paths: [("--state-dir", stateDir), ("--store-dir", storeDir)]) {
            throw ValidationError(problem)
        }
        var devConfiguration = WorkerConfiguration(
            // Its consumer groups get EmbeddedKafkaCluster.groupSessionTimeoutMs (FerryRuntime asks the cluster's id).
            kafka: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), topics: topics,
            storage: .local(URL(fileURLWithPath: storeDir)), dataRoot: root,
            stateDirectory: URL(fileURLWithPath: stateDir), region: "us-east-1", http: ProcessTransport.make())
        // The same access layout as `ferry worker`: triggers/Registrations.swift may substitute its resolver.
        devConfiguration.prefixResolver = Registrations.prefixResolver(configured: devConfiguration.prefixResolver)
        devConfiguration.httpAddress = httpAddress
        devConfiguration.tables = tables
        devConfiguration.adminToken = try configured { try AdminToken.load(file: nil, environment: environment("FERRY_ADMIN_TOKEN")) }
        // Every write is an event: the store's own notifications are taken on POST /notifications/s3.
        devConfiguration.roles.ingest = true
        for bucket in ingestBuckets {
            if let problem = RequestLimits.bucketNameProblem(bucket) { throw ValidationError("--ingest-bucket: \(problem.message)") }
        }
        devConfiguration.ingest.buckets = Set(ingestBuckets.isEmpty ? [Demo.bucket] : ingestBuckets)
        devConfiguration.ingest.token = try IngestToken.load(file: nil, environment: environment("FERRY_INGEST_TOKEN"))
            ?? "dev-\(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: ""))"
        if let httpAddress {
            print("Store notifications: POST http://\(httpAddress)/notifications/s3?token=\(devConfiguration.ingest.token!)")
        }
        let configuration = devConfiguration
        let registry = try TriggerSetup.registry(environment: FerryRuntime.triggerEnvironment(configuration), transport: configuration.http)

        guard demo else {
            print("Object store: \(URL(fileURLWithPath: storeDir).standardizedFileURL.path)")
            print("Data root:    \(root.path)")
            print("Ready. Enqueue with: ferry enqueue upload --bootstrap-servers \(cluster.bootstrapServers) --bucket demo --key hello.txt --source \(root.path)/hello.txt --wait")
            print("Record table: posts (key id; ferry items put --table posts:id …)")
            flushStandardOutput()
            try await runUntilSignalled(exitWithin: configuration.shutdownBoundSeconds, logger: logger) {
                try await FerryRuntime.run(configuration: configuration, registry: registry, logger: logger, stateLock: stateLock)
            }
            return
        }

        let runtime = Task { try await FerryRuntime.run(configuration: configuration, registry: registry, logger: logger, stateLock: stateLock) }
        let succeeded: Bool
        do {
            succeeded = try await Demo(bootstrapServers: cluster.bootstrapServers, dataRoot: root,
                                       storeDirectory: URL(fileURLWithPath: storeDir), stateDirectory: URL(fileURLWithPath: stateDir),
                                       logger: logger).run()
        } catch {
            print("demo failed: \(error)")
            succeeded = false
        }
        runtime.cancel()
        _ = try? await runtime.value
        if !succeeded { throw ExitCode.failure }
    }
}
