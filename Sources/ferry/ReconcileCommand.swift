import ArgumentParser
import FerryCore
import FerryKafka
import FerryS3
import FerryLocalStore
import FerryStorage
import FerryStore
import FerryWorker
import Foundation
import Logging

/// `ferry reconcile`: announce the writes no event announced (a store without
/// notifications, a missed window) by comparing a bucket listing with the catalog.
struct ReconcileCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reconcile",
        abstract: "List a bucket prefix and announce the objects created, changed or removed that no event announced.",
        discussion: """
            The catalog (catalog.sqlite in --state-dir) first catches up with the events topic; then the
            listing and the catalog are walked side by side, one page (1,000 keys) at a time: a listed key the
            catalog lacks or holds with another ETag or size is announced as created (event and objects
            INSERT/MODIFY), a catalog key no longer listed as removed (REMOVE). A second run announces nothing
            new. Cost: one ListObjectsV2 per 1,000 keys, two Kafka messages per change.

            Examples:
              ferry reconcile --bucket photos --prefix public/ --bootstrap-servers kafka:9092 --state-dir /var/lib/ferry
              ferry reconcile --bucket photos --every 300        # every five minutes, until interrupted
              ferry reconcile --bucket photos --dry-run          # count, announce nothing
            """)

    @Option(help: "Bucket to reconcile.") var bucket: String
    @Option(help: "Key prefix (default: the whole bucket).") var prefix = ""
    @Option(name: .customLong("state-dir"), help: "Directory of the catalog (default .ferry, a worker's state dir).") var stateDir = ".ferry"
    @Option(name: .customLong("local-store"), help: "Reconcile a local object store directory instead of S3.") var localStore: String?
    @Option(help: "Run again every this many seconds (1…604,800), until interrupted.") var every: Double?
    @Flag(name: .customLong("dry-run"), help: "Count what would be announced; announce nothing.") var dryRun = false
    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var s3: S3Options
    @OptionGroup var log: LogOptions

    func run() async throws {
        var logOptions = log
        logOptions.level = log.level ?? environment("FERRY_LOG_LEVEL") ?? "warning"
        let logger = try logOptions.bootstrap(label: "ferry.reconcile")
        if let problem = RequestLimits.bucketNameProblem(bucket) { throw ValidationError(problem.message) }
        try requireRange(every, 1...604_800, "--every")
        let store: any ObjectStore = try localStore.map { try LocalObjectStore(root: URL(fileURLWithPath: $0)) }
            ?? configured { try s3.client() }
        let kafkaConfiguration = try kafka.configuration()
        let producer = try KafkaProducer(configuration: kafkaConfiguration, logger: logger)
        let reconciler = Reconciler(store: store, catalog: try ObjectCatalog(directory: URL(fileURLWithPath: stateDir)),
                                    producer: producer, kafka: kafkaConfiguration, topics: kafka.topics, region: try s3.validRegion(),
                                    resolver: DefaultPrefixResolver(), logger: logger)
        repeat {
            let started = ContinuousClock.now
            let caughtUp = try await reconciler.catchUp()
            print("catalog caught up with \(kafka.topics.events): \(caughtUp) event(s) read")
            let report = try await reconciler.reconcile(bucket: bucket, prefix: prefix, dryRun: dryRun) { report in
                if report.pages % 10 == 0 { print("… \(report)"); flushStandardOutput() }
            }
            print("\(dryRun ? "dry run: would have " : "")\(report) in \(started.duration(to: .now)); peak memory \(Self.peakResidentMiB()) MiB")
            flushStandardOutput()
            guard let every else { break }
            try await Task.sleep(for: .seconds(clamping: every))
        } while !Task.isCancelled
        await producer.flush()
    }

    /// The process's peak resident memory (VmHWM), MiB.
    static func peakResidentMiB() -> Int { (ProcessStatus.read()["VmHWM"] ?? 0) / 1024 }
}
