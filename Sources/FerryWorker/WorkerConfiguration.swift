import FerryCore
import FerryEngine
import FerryKafka
import FerryS3
import FerryLocalStore
import FerryStorage
import Foundation

/// Everything a worker process needs; the command line fills it from flags
/// and environment variables (see docs/operators/configuration.md).
public struct WorkerConfiguration: Sendable {
    /// Where objects live.
    public enum Storage: Sendable {
        case s3(S3Client.Configuration)
        /// A `LocalObjectStore` directory (the embedded default).
        case local(URL)
    }

    /// What this process runs.
    public struct Roles: Sendable, Hashable {
        public var transfers: Bool
        public var triggers: Bool
        /// Turns the store's own notifications into events (`IngestProcessor`).
        public var ingest: Bool
        public init(transfers: Bool = true, triggers: Bool = true, ingest: Bool = false) {
            self.transfers = transfers; self.triggers = triggers; self.ingest = ingest
        }

        /// `all`, or a comma-separated list of `transfers`, `triggers`, `ingest`.
        public init(parsing text: String) throws(ConfigurationError) {
            if text == "all" { self.init(transfers: true, triggers: true, ingest: false); return }
            self.init(transfers: false, triggers: false, ingest: false)
            for name in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
                switch name {
                case "transfers": transfers = true
                case "triggers": triggers = true
                case "ingest": ingest = true
                default: throw ConfigurationError("--role takes all, or a comma-separated list of transfers, triggers, ingest; got '\(name)'")
                }
            }
            guard transfers || triggers || ingest else { throw ConfigurationError("--role names no role") }
        }
    }

    /// The ingest role's inputs and its rule for Ferry's own removals.
    public struct IngestSettings: Sendable {
        /// The secret stores present on `POST /notifications/s3`; nil turns the endpoint off.
        public var token: String?
        /// Further topics where a store already sends its notifications (MinIO's or RGW's Kafka targets).
        public var topics: [String] = []
        /// The buckets whose notifications are taken: a notification for any
        /// other is refused (403 on the endpoint; dropped with a logged reason
        /// from a topic), so nothing Ferry does not serve is announced. The
        /// ingest role needs at least one.
        public var buckets: Set<String> = []
        /// How long a removal is held for a worker's own announcement of it.
        public var settleSeconds: Double = 5
        public init() {}
    }

    public var kafka: KafkaConfiguration
    public var topics: Topics
    public var storage: Storage
    public var dataRoot: DataRoot
    /// How callers share the data root (`worker.dataRootLayout`): `shared`
    /// for trusted producers, `access-levels` (required with `auth.mode jwt`)
    /// to confine each request's local files to its caller's areas.
    public var dataRootLayout: DataRootLayout = .shared
    /// Where trigger handlers keep their files (the audit log, the object
    /// index): Ferry's own, outside the data root (`<state dir>/trigger-output`
    /// unless `worker.triggerOutputDir` says otherwise).
    public var triggerOutputDirectory: URL
    public var stateDirectory: URL
    /// Names this worker in statuses and logs (default `hostname-pid`).
    public var workerId: String
    public var region: String
    public var engine: TransferEngine.Configuration
    public var roles: Roles
    /// Minimum time between two `running` progress statuses of one transfer.
    public var progressIntervalSeconds: Double
    public var prefixResolver: any PrefixResolver
    /// Rights of guest and authenticated callers per scope (Amplify's CRUD per role).
    public var permissions = AccessPermissions.defaults
    /// Buckets copies may read besides the request's own; nil allows any.
    public var copySourceBuckets: Set<String>? = []
    /// The store's own notifications (role ingest).
    public var ingest = IngestSettings()
    /// Record tables this worker writes (item requests) and keeps a view of.
    public var tables: [TableDefinition] = []
    /// HTTPS completion callbacks: signing secret, reachable addresses, attempts.
    public var callbacks = CallbackSettings()
    /// The rules every request passes before any byte moves.
    public var accessPolicy: AccessPolicy {
        AccessPolicy(permissions: permissions, copySourceBuckets: copySourceBuckets, resolver: prefixResolver)
    }
    /// Identity proof required of requests (default: none, trusted producers).
    public var auth = AuthConfiguration()
    /// After SIGTERM, transfers in flight get this long to finish before they are stopped.
    public var shutdownGraceSeconds: Double = 30
    /// After the grace, what is left of a shutdown (outbox drain, offset commit,
    /// leaving the group) gets at most this long; then the process exits anyway.
    /// So SIGTERM always ends the process within `shutdownGraceSeconds` + this.
    public static let shutdownTailSeconds: Double = 30
    /// The longest a graceful stop may take.
    public var shutdownBoundSeconds: Double { shutdownGraceSeconds + Self.shutdownTailSeconds }
    /// When partitions are revoked in a rebalance, their transfers get this long to finish before they are handed off.
    public var rebalanceGraceSeconds: Double = 10
    /// This worker's incomplete multipart uploads older than this are aborted (AbortIncompleteMultipartUpload).
    public var sweepAfterSeconds: Double = 86_400
    /// `HOST:PORT` of the HTTP endpoints (/metrics, /healthz, /readyz, /transfers); nil serves none.
    public var httpAddress: String?
    /// The bearer token of the HTTP port's /transfers routes; nil turns them off.
    public var adminToken: String?
    /// A message started this many times without an outcome (its worker died
    /// each time) is dead-lettered as `PoisonMessage` instead of run again.
    public var maxStarts: Int = 3
    /// Finished transfer ids are remembered (for deduplication) this long.
    public var finishedRetentionSeconds: Double = 7 * 86_400
    /// The process's one HTTP transport: storage, https sources, webhook targets
    /// and the triggers' object store share it, so `--max-connections` and
    /// `--max-buffered-bytes` bound the whole process.
    public var http: CurlTransport

    public init(kafka: KafkaConfiguration, topics: Topics = Topics(), storage: Storage, dataRoot: DataRoot,
                stateDirectory: URL, workerId: String = WorkerConfiguration.defaultWorkerId, region: String, http: CurlTransport,
                engine: TransferEngine.Configuration = .init(), roles: Roles = .init(),
                progressIntervalSeconds: Double = 0.5, prefixResolver: any PrefixResolver = DefaultPrefixResolver()) {
        self.kafka = kafka; self.topics = topics; self.storage = storage; self.dataRoot = dataRoot; self.http = http
        self.stateDirectory = stateDirectory; self.workerId = workerId; self.region = region
        triggerOutputDirectory = stateDirectory.appendingPathComponent("trigger-output")
        self.engine = engine; self.roles = roles; self.progressIntervalSeconds = progressIntervalSeconds
        self.prefixResolver = prefixResolver
    }

    public static var defaultWorkerId: String {
        "\(ProcessInfo.processInfo.hostName)-\(getpid())"
    }
}
