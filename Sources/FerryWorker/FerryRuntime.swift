import FerryCore
import FerryEngine
import FerryKafka
import FerryS3
import FerryLocalStore
import FerryStorage
import FerryStore
import FerryTriggerKit
import FerryTriggers
import Foundation
import Logging
import FerryConcurrency

/// Builds a worker process from its configuration and runs its roles
/// (transfer worker, trigger dispatcher) until the task is cancelled.
public enum FerryRuntime {
    public static func makeStore(_ storage: WorkerConfiguration.Storage, http: CurlTransport) throws(FerryError) -> any ObjectStore {
        switch storage {
        case .s3(let configuration): return S3Client(configuration, transport: http)
        case .local(let root): return try LocalObjectStore(root: root)
        }
    }

    /// What trigger handlers are given: the data root, their output directory,
    /// region, the workers' prefix resolver and storage.
    public static func triggerEnvironment(_ configuration: WorkerConfiguration) -> TriggerEnvironment {
        .worker(dataRoot: URL(fileURLWithPath: configuration.dataRoot.path),
                outputDirectory: configuration.triggerOutputDirectory, region: configuration.region,
                prefixResolver: configuration.prefixResolver,
                store: try? makeStore(configuration.storage, http: configuration.http), transport: configuration.http)
    }

    /// `stateLock`: the state directory's lock when the caller took it
    /// earlier (`ferry dev`, before it starts its cluster); else taken here.
    public static func run(configuration given: WorkerConfiguration, registry: TriggerRegistry, logger: Logger,
                           stateLock: StateDirectoryLock? = nil) async throws {
        fixHeapThreshold(logger: logger)
        // Before anything joins Kafka: a second worker on this state directory stops here, with the first's name.
        let lock = try stateLock ?? StateDirectoryLock(directory: given.stateDirectory, holder: "worker \(given.workerId)")
        defer { lock.release() }
        // Installed before any metric is made: swift-metrics binds a metric to the backend it was made with.
        let metrics = given.httpAddress.map { _ in WorkerMetrics.registry() }
        let producer = try KafkaProducer(configuration: given.kafka, logger: logger)
        let configuration = await settled(given, producer: producer, logger: logger)
        let started = try await startRoles(configuration, registry: registry, producer: producer, logger: logger)
        logger.info("ferry worker \(configuration.workerId) running",
                    metadata: ["transfers": "\(configuration.roles.transfers)", "triggers": "\(configuration.roles.triggers)",
                               "ingest": "\(configuration.roles.ingest)", "triggerCount": "\(registry.names.count)"])
        var server: AdminServer?
        if let address = configuration.httpAddress, let metrics {
            var router = AdminRouter(workerId: configuration.workerId, health: started.health, metrics: metrics,
                                     inFlight: started.inFlight, engine: started.engine, state: started.state,
                                     adminToken: configuration.adminToken)
            router.notifications = started.notifications
            server = try await AdminServer.start(address: address, router: router, logger: logger)
        }
        await runUntilStopped(started.roles, server: server, producer: producer, logger: logger)
    }

    /// Before the first large block is freed (HeapTrimmer.fixMmapThreshold says why).
    private static func fixHeapThreshold(logger: Logger) {
        switch HeapTrimmer.fixMmapThreshold() {
        case .fixed: logger.info("glibc's mmap threshold fixed at \(HeapTrimmer.mappedFrom >> 10) KiB (GLIBC_TUNABLES=glibc.malloc.mmap_threshold=<bytes> chooses another)")
        case .environment: logger.info("glibc's mmap threshold left as the environment sets it (GLIBC_TUNABLES or MALLOC_MMAP_THRESHOLD_)")
        case .refused: logger.warning("glibc refused to fix its mmap threshold at \(HeapTrimmer.mappedFrom) bytes; its sliding threshold stays, and idle memory may stay higher")
        }
    }

    /// The configuration as the broker and the roles make it: the embedded
    /// cluster's group settings, and the data root's layout said once.
    private static func settled(_ given: WorkerConfiguration, producer: KafkaProducer, logger: Logger) async -> WorkerConfiguration {
        var configuration = given
        configuration.kafka = EmbeddedKafkaCluster.groupConfiguration(given.kafka, clusterId: await producer.clusterId())
        if configuration.kafka["session.timeout.ms"] != given.kafka["session.timeout.ms"] {
            logger.info("the broker is Ferry's embedded cluster: consumer groups use session.timeout.ms=\(EmbeddedKafkaCluster.groupSessionTimeoutMs) and heartbeat.interval.ms=\(configuration.kafka["heartbeat.interval.ms"] ?? "3000"), so that a worker joining takes seconds (set it with --kafka-property to override)")
        }
        if configuration.roles.transfers {
            switch configuration.dataRootLayout {
            case .shared:
                logger.info("data root \(configuration.dataRoot.path), layout shared: any request may name any file under it (trusted producers; --data-root-layout access-levels confines each caller to its areas)")
            case .accessLevels:
                logger.info("data root \(configuration.dataRoot.path), layout access-levels: a request's files must be under public/, protected/<identityId>/ or private/<identityId>/ as its caller may use them")
            }
        }
        return configuration
    }

    /// What the roles this worker runs are, and what the admin server shows of them.
    private struct StartedRoles {
        var roles: [@Sendable () async -> Void] = []
        var health: WorkerHealth
        var inFlight = InFlightTransfers()
        var engine: TransferEngine?
        var state: WorkerStateStore?
        var notifications: NotificationEndpoint?
    }

    private static func startRoles(_ configuration: WorkerConfiguration, registry: TriggerRegistry, producer: KafkaProducer,
                                   logger: Logger) async throws -> StartedRoles {
        var started = StartedRoles(health: WorkerHealth(transfers: configuration.roles.transfers))
        if !configuration.roles.transfers { started.health.storage(reachable: true) }
        if configuration.roles.transfers {
            var engineConfiguration = configuration.engine
            if case .s3(let s3) = configuration.storage, let accelerated = s3.endpoint.accelerated {
                var fast = s3
                fast.endpoint = accelerated
                engineConfiguration.acceleratedStore = S3Client(fast, transport: configuration.http)
            }
            // Claim-checked uploads (`kafka-chunks://`) are read from this worker's Kafka.
            engineConfiguration.chunks = KafkaChunkFetcher(kafka: configuration.kafka, topic: configuration.topics.uploads, logger: logger)
            let engine = TransferEngine(store: try makeStore(configuration.storage, http: configuration.http), dataRoot: configuration.dataRoot,
                                        configuration: engineConfiguration, logger: logger)
            let state = try WorkerStateStore(directory: configuration.stateDirectory)
            let identity = try await IdentityVerifier(configuration.auth)
            let worker = try await TransferWorker(configuration: configuration, engine: engine, state: state, producer: producer,
                                                  identity: identity, inFlight: started.inFlight, health: started.health, logger: logger)
            started.roles.append { await worker.run() }
            started.engine = engine
            started.state = state
        }
        if configuration.roles.triggers {
            let dispatcher = try TriggerDispatcher(registry: registry, environment: triggerEnvironment(configuration), topics: configuration.topics,
                                                   kafka: configuration.kafka, producer: producer, maxStarts: configuration.maxStarts,
                                                   logger: logger)
            started.roles.append { await dispatcher.run() }
        }
        if configuration.roles.ingest {
            let ingest = try await IngestProcessor(configuration: configuration, store: try makeStore(configuration.storage, http: configuration.http),
                                                   producer: producer, logger: logger)
            started.roles.append { await ingest.run() }
            if let token = configuration.ingest.token {
                started.notifications = NotificationEndpoint(token: token, buckets: configuration.ingest.buckets, producer: producer,
                                                             topics: configuration.topics, logger: logger)
            } else {
                logger.warning("role ingest without an ingest token: POST /notifications/s3 is off; only topics are read (\([configuration.topics.ingest] + configuration.ingest.topics))")
            }
        }
        return started
    }

    /// Runs the roles until the task is cancelled (a signal) or they all end,
    /// then stops the admin server and flushes the producer, timing each step.
    private static func runUntilStopped(_ roles: [@Sendable () async -> Void], server: AdminServer?, producer: KafkaProducer,
                                        logger: Logger) async {
        let trimmer = Task { await HeapTrimmer.run() }
        let stopping = ShutdownSteps()
        await withTaskCancellationHandler {
            await withTaskGroup(of: Void.self) { group in
                for role in roles { group.addTask(operation: role) }
            }
            // Roles run until cancelled; if they all end without it, the stop is timed from here
            // and said as such (otherwise its line would read "0.0 s: no steps").
            let asked = stopping.begun
            if asked { stopping.ended("roles") } else { stopping.begin() }
            trimmer.cancel()
            await server?.stop()
            stopping.ended("admin server")
            await producer.flush()
            stopping.ended("producer flush")
            if asked {
                logger.log(level: stopping.isSlow ? .warning : .info, "worker stopped in \(stopping.summary)")
            } else {
                logger.warning("worker stopped without a stop signal (every role ended by itself) in \(stopping.summary)")
            }
        } onCancel: {
            stopping.begin()
        }
    }
}
