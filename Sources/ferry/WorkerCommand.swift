import ArgumentParser
import FerryCore
import FerryEngine
import FerryS3
import FerryStorage
import FerryTriggerKit
import FerryTriggers
import FerryWorker
import Foundation
import Logging
import Triggers

struct WorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Consume transfer requests, run them, publish statuses and events, and dispatch triggers.",
        discussion: """
            Examples:
              ferry worker --bootstrap-servers kafka:9092 --s3-endpoint http://127.0.0.1:7480 --data-root /srv/ferry
              FERRY_BOOTSTRAP_SERVERS=kafka:9092 AWS_REGION=eu-west-1 ferry worker --data-root /srv/ferry
              ferry worker --bootstrap-servers 127.0.0.1:9092 --local-store /var/lib/ferry/objects --data-root /srv/ferry
              ferry worker --config /etc/ferry/worker.yaml --http-address 0.0.0.0:9090
            """)

    @OptionGroup var options: WorkerOptions

    func run() async throws {
        var options = self.options
        try options.load()
        let logger = try options.log.bootstrap(label: "ferry.worker")
        let configuration = try configured(options.makeConfiguration)
        let home = ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory()
        let secretFiles = [options.jwtSecretFile, environment("AWS_SHARED_CREDENTIALS_FILE") ?? "\(home)/.aws/credentials"]
        for path in secretFiles.compactMap({ $0 }) where SecretRedaction.isExposed(path) {
            logger.warning("\(path) holds secrets and is readable by other users: chmod 600 \(path)")
        }
        if case .s3(let s3) = configuration.storage {
            // Fail at start, with the reason, rather than on every request.
            do {
                let keys = try await s3.credentials.credentials()
                logger.info("S3 credentials from \(s3.credentials.source): access key \(keys.accessKeyId)")
            } catch {
                throw ValidationError("cannot obtain S3 credentials from \(s3.credentials.source): \(error.message)")
            }
        }
        let registry = try TriggerSetup.registry(environment: FerryRuntime.triggerEnvironment(configuration), transport: configuration.http)
        // What `ferry config check` checks ends here; what follows needs Kafka.
        logger.info("configuration accepted; joining Kafka at \(configuration.kafka["bootstrap.servers"] ?? "?")")
        try await runUntilSignalled(exitWithin: configuration.shutdownBoundSeconds, logger: logger) {
            try await FerryRuntime.run(configuration: configuration, registry: registry, logger: logger)
        }
    }
}

/// Everything `ferry worker` reads, from flags, `FERRY_*` variables and `--config`.
struct WorkerOptions: ParsableArguments {
    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var s3: S3Options
    @OptionGroup var log: LogOptions
    @OptionGroup var config: ConfigFileOption

    @Option(name: .customLong("http-address"),
            help: "HOST:PORT for /metrics, /healthz, /readyz and the admin API /transfers (env FERRY_HTTP_ADDRESS; default: none).")
    var httpAddress: String?

    @Option(name: .customLong("admin-token-file"),
            help: "File holding the bearer token of the /transfers routes (or env FERRY_ADMIN_TOKEN; without one they are off).")
    var adminTokenFile: String?

    @Option(name: .customLong("data-root"), help: "Directory that file:// sources and destinations must be inside (env FERRY_DATA_ROOT).")
    var dataRoot: String?

    @Option(name: .customLong("data-root-layout"),
            help: "shared (any request may name any file under the data root: trusted producers) or access-levels (a request's files must be under public/, protected/<identityId>/ or private/<identityId>/ as its caller may use them). Env FERRY_DATA_ROOT_LAYOUT; default shared, access-levels with --auth-mode jwt, which refuses shared.")
    var dataRootLayout: String?

    @Option(name: .customLong("state-dir"), help: "Directory of this worker's SQLite state (env FERRY_STATE_DIR; default .ferry).")
    var stateDir: String?

    @Option(name: .customLong("trigger-output-dir"),
            help: "Directory of the trigger handlers' own files (the audit log, the object index), outside the data root (env FERRY_TRIGGER_OUTPUT_DIR; default <state dir>/trigger-output).")
    var triggerOutputDir: String?

    @Option(name: .customLong("local-store"), help: "Keep objects in this directory instead of S3 (env FERRY_LOCAL_STORE).")
    var localStore: String?

    @Option(name: .customLong("max-transfers"), help: "Transfers run at once (env FERRY_MAX_TRANSFERS; default 8).")
    var maxTransfers: Int?

    @Option(name: .customLong("worker-id"), help: "Name in statuses and logs (env FERRY_WORKER_ID; default HOST-PID).")
    var workerId: String?

    @Option(help: "all (transfers and triggers), or a comma-separated list of transfers, triggers, ingest (env FERRY_ROLE; default all).")
    var role: String?

    @Option(name: .customLong("ingest-token-file"),
            help: "File holding the token stores present on POST /notifications/s3 (or env FERRY_INGEST_TOKEN); without one the endpoint is off.")
    var ingestTokenFile: String?
    @Option(name: .customLong("ingest-topic"), parsing: .singleValue,
            help: "A topic where a store already sends its notifications (MinIO or RGW Kafka target), repeatable.")
    var ingestTopics: [String] = []
    @Option(name: .customLong("ingest-bucket"), parsing: .singleValue,
            help: "A bucket whose store notifications the ingest role takes, repeatable (env FERRY_INGEST_BUCKETS, comma-separated); notifications for any other are refused. The ingest role needs one.")
    var ingestBuckets: [String] = []
    @Option(name: .customLong("table"), parsing: .singleValue,
            help: "A record table, NAME:PARTITION_KEY[/SORT_KEY][:delete-files], repeatable (env FERRY_TABLES, comma-separated). Every worker of a fleet declares the same tables.")
    var tables: [String] = []
    @Option(name: .customLong("ingest-settle"), help: "Seconds a store's removal waits for a worker's own announcement of it (default 5).")
    var ingestSettle: Double?

    @Flag(name: .customLong("https-sources"), help: "Allow https:// upload sources (e.g. presigned GETs). Off by default.")
    var httpsSources = false

    @Option(name: .customLong("https-source-host"), parsing: .singleValue,
            help: "Only these source hosts (repeatable; .example.com allows subdomains). Default: any public host.")
    var httpsSourceHosts: [String] = []

    @Option(name: .customLong("https-source-allow-range"), parsing: .singleValue,
            help: "A CIDR range sources may reach although loopback/link-local/private, e.g. 10.1.0.0/16 (repeatable).")
    var httpsSourceRanges: [String] = []

    @Option(name: .customLong("shutdown-grace"), help: "Seconds transfers in flight get to finish after SIGTERM (default 30).")
    var shutdownGrace: Double?
    @Option(name: .customLong("rebalance-grace"),
            help: "Seconds transfers on revoked partitions get to finish in a rebalance before they are handed off (default 10).")
    var rebalanceGrace: Double?
    @Option(name: .customLong("sweep-after"),
            help: "Abort this worker's incomplete multipart uploads older than this many seconds (default 86400).")
    var sweepAfter: Double?
    @Option(name: .customLong("max-starts"),
            help: "Starts without an outcome (its worker died each time) after which a request is dead-lettered as PoisonMessage, and a trigger event or stream record sent to its failure destination as WorkerCrashed, 2…100 (default 3; below 2 the messages beside it would go too).")
    var maxStarts: Int?
    @Option(name: .customLong("finished-retention"),
            help: "Seconds finished transfer ids are remembered to answer duplicates (default 604800, 7 days).")
    var finishedRetention: Double?

    @Option(name: .customLong("prefix-guest"), help: "Key prefix of guest objects (default public/).")
    var prefixGuest: String?
    @Option(name: .customLong("prefix-protected"), help: "Template for protected objects (default protected/{identityId}/).")
    var prefixProtected: String?
    @Option(name: .customLong("prefix-private"), help: "Template for private objects (default private/{identityId}/).")
    var prefixPrivate: String?
    @Flag(name: .customLong("prefix-passthrough"), help: "No access-level prefixes: keys are used as written (levels become labels only).")
    var prefixPassthrough = false
    @Option(name: .customLong("guest-permission"),
            help: "SCOPE=RIGHTS for guest callers, repeatable: scopes guest, protected, protectedOwn, privateOwn; rights read+write+delete or none (env FERRY_GUEST_PERMISSIONS; defaults in docs/security.md).")
    var guestPermissions: [String] = []
    @Option(name: .customLong("authenticated-permission"),
            help: "SCOPE=RIGHTS for authenticated callers, repeatable (env FERRY_AUTHENTICATED_PERMISSIONS).")
    var authenticatedPermissions: [String] = []
    @Option(name: .customLong("copy-source-bucket"),
            help: "A bucket copies may read besides the request's own, repeatable; * allows any (env FERRY_COPY_SOURCE_BUCKETS).")
    var copySourceBuckets: [String] = []

    @Option(name: .customLong("auth-mode"), help: "none (trusted producers) or jwt (env FERRY_AUTH_MODE; default none).")
    var authMode: String?

    @Option(name: .customLong("jwt-secret-file"), help: "File holding the HMAC secret, at least 32 bytes: HS256 (HS384 from 48 bytes, HS512 from 64; or env FERRY_JWT_SECRET).")
    var jwtSecretFile: String?

    @Option(name: .customLong("jwt-public-key"), help: "PEM file of an RSA (RS256…512, PS256…512) or EC (ES256, ES384, ES512 by curve) public key.")
    var jwtPublicKey: String?

    @Option(name: .customLong("jwt-jwks"), help: "JSON Web Key Set file (keys chosen by kid; each allows its type's algorithms, or its own alg).")
    var jwtJWKS: String?

    @Option(name: .customLong("jwt-issuer"), help: "Required iss claim.") var jwtIssuer: String?
    @Option(name: .customLong("jwt-audience"), help: "Required aud claim member.") var jwtAudience: String?
    @Option(name: .customLong("jwt-identity-claim"), help: "Claim that must equal identityId (default sub).") var jwtIdentityClaim: String?
    @Flag(name: .customLong("allow-guests"),
          help: "With --auth-mode jwt: serve requests without a token as anonymous guests instead of refusing them (env FERRY_ALLOW_GUESTS).")
    var allowGuests = false
    @Option(name: .customLong("jwt-guest-issuer"),
            help: "With --auth-mode jwt: tokens with this iss prove a guest identity (Cognito's unauthenticated role), not an authenticated one.")
    var jwtGuestIssuer: String?

    @Option(name: .customLong("callback-secret-file"),
            help: "File holding the HMAC secret that signs https completion callbacks (or env FERRY_CALLBACK_SECRET); without one, https callbacks are refused.")
    var callbackSecretFile: String?
    @Option(name: .customLong("callback-host"), parsing: .singleValue,
            help: "A host https callbacks may reach, repeatable (.example.com for subdomains; default: any public host).")
    var callbackHosts: [String] = []
    @Option(name: .customLong("callback-allow-range"), parsing: .singleValue,
            help: "An internal address range (CIDR) https callbacks may reach anyway, repeatable.")
    var callbackRanges: [String] = []

    @Option(name: .customLong("https-source-max-bytes"), help: "Largest https:// source, e.g. 5GiB (default 5GiB).")
    var httpsSourceMaxBytes: String?

    /// Reads the configuration file, then fills every option the user did not
    /// set from the environment or the file (flags > environment > file).
    mutating func load() throws {
        try config.install()
        kafka.resolve()
        try s3.resolve()
        log.resolve()
        Resolve.string(&httpAddress, .httpAddress)
        Resolve.string(&adminTokenFile, .adminTokenFile)
        Resolve.string(&dataRoot, .dataRoot)
        Resolve.string(&stateDir, .stateDir)
        Resolve.string(&dataRootLayout, .dataRootLayout)
        Resolve.string(&triggerOutputDir, .triggerOutputDir)
        Resolve.string(&localStore, .localStore)
        try Resolve.number(&maxTransfers, .maxTransfers)
        Resolve.string(&workerId, .workerId)
        Resolve.string(&role, .role)
        Resolve.string(&ingestTokenFile, .ingestTokenFile)
        Resolve.list(&ingestTopics, .ingestTopics)
        Resolve.list(&ingestBuckets, .ingestBuckets)
        Resolve.list(&tables, .tables)
        try Resolve.number(&ingestSettle, .ingestSettle)
        try Resolve.flag(&httpsSources, .httpsSources)
        Resolve.list(&httpsSourceHosts, .httpsSourceHosts)
        Resolve.string(&callbackSecretFile, .callbackSecretFile)
        Resolve.list(&callbackHosts, .callbackHosts)
        Resolve.list(&callbackRanges, .callbackAllowRanges)
        Resolve.list(&httpsSourceRanges, .httpsSourceAllowRanges)
        Resolve.string(&httpsSourceMaxBytes, .httpsSourceMaxBytes)
        try Resolve.number(&shutdownGrace, .shutdownGrace)
        try Resolve.number(&rebalanceGrace, .rebalanceGrace)
        try Resolve.number(&sweepAfter, .sweepAfter)
        try Resolve.number(&finishedRetention, .finishedRetention)
        try Resolve.number(&maxStarts, .maxStarts)
        Resolve.string(&prefixGuest, .prefixGuest)
        Resolve.string(&prefixProtected, .prefixProtected)
        Resolve.string(&prefixPrivate, .prefixPrivate)
        try Resolve.flag(&prefixPassthrough, .prefixPassthrough)
        Resolve.list(&guestPermissions, .guestPermissions)
        Resolve.list(&authenticatedPermissions, .authenticatedPermissions)
        Resolve.list(&copySourceBuckets, .copySourceBuckets)
        try Resolve.flag(&allowGuests, .allowGuests)
        Resolve.string(&jwtGuestIssuer, .jwtGuestIssuer)
        Resolve.string(&authMode, .authMode)
        Resolve.string(&jwtSecretFile, .jwtSecretFile)
        Resolve.string(&jwtPublicKey, .jwtPublicKey)
        Resolve.string(&jwtJWKS, .jwtJWKS)
        Resolve.string(&jwtIssuer, .jwtIssuer)
        Resolve.string(&jwtAudience, .jwtAudience)
        Resolve.string(&jwtIdentityClaim, .jwtIdentityClaim)
    }

    /// The worker's configuration from the resolved options. The checks run in
    /// this order, so that with several mistakes the most specific is named first.
    func makeConfiguration() throws -> WorkerConfiguration {
        let kafkaConfiguration = try kafka.configuration()
        guard let root = dataRoot else {
            throw ValidationError("no data root: pass --data-root or set FERRY_DATA_ROOT")
        }
        // One transport for the process: its limits bound storage, https sources, webhooks and STS together.
        let http = try s3.transport()
        let storage = try storageChoice(http: http)
        let engine = try engineConfiguration(http: http)
        let roles = try configured { try WorkerConfiguration.Roles(parsing: role ?? "all") }
        if let problem = WritableDirectory.problem(stateDir ?? ".ferry", option: "--state-dir") { throw ValidationError(problem) }
        if let httpAddress { _ = try configured { try ListenAddress(parsing: httpAddress) } }
        var configuration = WorkerConfiguration(
            kafka: kafkaConfiguration, topics: kafka.topics, storage: storage, dataRoot: try DataRoot(root),
            stateDirectory: URL(fileURLWithPath: stateDir ?? ".ferry"),
            workerId: workerId ?? WorkerConfiguration.defaultWorkerId,
            region: try s3.validRegion(), http: http, engine: engine, roles: roles)
        configuration.callbacks = try callbackSettings()
        try applyIngestAndTables(to: &configuration)
        configuration.auth = try authConfiguration()
        configuration.dataRootLayout = try layout(auth: configuration.auth.mode)
        if let triggerOutputDir { configuration.triggerOutputDirectory = URL(fileURLWithPath: triggerOutputDir) }
        configuration.httpAddress = httpAddress
        configuration.adminToken = try AdminToken.load(file: adminTokenFile, environment: environment("FERRY_ADMIN_TOKEN"))
        try applyTimings(to: &configuration)
        configuration.prefixResolver = try prefixResolver(configured: configuration.prefixResolver)
        do {
            try configuration.permissions.apply(guestPermissions, to: .guest)
            try configuration.permissions.apply(authenticatedPermissions, to: .authenticated)
        } catch {
            throw ValidationError(error.description)
        }
        configuration.copySourceBuckets = try copySourceBucketSet()
        // Last, so that a more specific mistake is named first.
        try checkDataRootExposure(configuration)
        return configuration
    }

    /// `--local-store`, or S3 over the process's transport.
    private func storageChoice(http: CurlTransport) throws -> WorkerConfiguration.Storage {
        if let local = localStore {
            if let problem = WritableDirectory.problem(local, option: "--local-store") { throw ValidationError(problem) }
            return .local(URL(fileURLWithPath: local))
        }
        return .s3(try s3.configuration(transport: http))
    }

    /// Transfer defaults, https sources and the number of transfers at once.
    private func engineConfiguration(http: CurlTransport) throws -> TransferEngine.Configuration {
        var engine = TransferEngine.Configuration()
        engine.defaults = try s3.limits.settings()
        if httpsSources {
            var policy = RemoteSourcePolicy()
            policy.allowedHosts = httpsSourceHosts
            do {
                policy.allowedRanges = try httpsSourceRanges.map { range throws(ConfigurationError) in try AddressRange(range) }
            } catch {
                throw ValidationError(error.description)
            }
            if let max = httpsSourceMaxBytes { policy.maxBytes = try ByteSize.parse(max, option: "--https-source-max-bytes") }
            engine.remoteSources = RemoteSourceFetcher(policy: policy, transport: http)
        }
        try requireRange(maxTransfers, 1...4096, "--max-transfers")
        if let max = maxTransfers { engine.maxTransfers = max }
        return engine
    }

    /// The ingest role's token, topics, buckets and settling time, and the record tables.
    private func applyIngestAndTables(to configuration: inout WorkerConfiguration) throws {
        configuration.ingest.token = try IngestToken.load(file: ingestTokenFile, environment: environment("FERRY_INGEST_TOKEN"))
        configuration.ingest.topics = ingestTopics
        for bucket in ingestBuckets {
            if let problem = RequestLimits.bucketNameProblem(bucket) { throw ValidationError("--ingest-bucket: \(problem.message)") }
        }
        configuration.ingest.buckets = Set(ingestBuckets)
        if configuration.roles.ingest && ingestBuckets.isEmpty {
            throw ValidationError("--role ingest needs the buckets whose notifications it takes: --ingest-bucket NAME (repeatable), ingest.buckets or FERRY_INGEST_BUCKETS; a notification for any other bucket is refused")
        }
        configuration.tables = try configured { try TableDefinition.parseAll(tables) }
        try requireRange(ingestSettle, 0...300, "--ingest-settle")
        if let ingestSettle { configuration.ingest.settleSeconds = ingestSettle }
    }

    /// Grace periods, retention and the crash-loop breaker's count, in the
    /// ranges the configuration reference gives.
    private func applyTimings(to configuration: inout WorkerConfiguration) throws {
        try requireRange(shutdownGrace, 0...86_400, "--shutdown-grace")
        // A rebalance callback blocks the consumer's poll: stay well inside max.poll.interval.ms (300 s).
        try requireRange(rebalanceGrace, 0...240, "--rebalance-grace")
        try requireRange(sweepAfter, 1...315_360_000, "--sweep-after")
        try requireRange(finishedRetention, 1...315_360_000, "--finished-retention")
        try requireRange(maxStarts, 2...100, "--max-starts")
        if let shutdownGrace { configuration.shutdownGraceSeconds = shutdownGrace }
        if let rebalanceGrace { configuration.rebalanceGraceSeconds = rebalanceGrace }
        if let sweepAfter { configuration.sweepAfterSeconds = sweepAfter }
        if let finishedRetention { configuration.finishedRetentionSeconds = finishedRetention }
        if let maxStarts { configuration.maxStarts = maxStarts }
    }

    /// The `--prefix-*` options' resolver, then what triggers/Registrations.swift makes of it.
    private func prefixResolver(configured: any PrefixResolver) throws -> any PrefixResolver {
        var resolver = configured
        if prefixPassthrough {
            guard prefixGuest == nil && prefixProtected == nil && prefixPrivate == nil else {
                throw ValidationError("--prefix-passthrough excludes the --prefix-* templates")
            }
            resolver = PassThroughPrefixResolver()
        } else if prefixGuest != nil || prefixProtected != nil || prefixPrivate != nil {
            let defaults = try TemplatePrefixResolver()
            resolver = try TemplatePrefixResolver(guest: prefixGuest ?? defaults.guest, protected: prefixProtected ?? defaults.protected,
                                                  private: prefixPrivate ?? defaults.private)
        }
        return Registrations.prefixResolver(configured: resolver)
    }

    /// `--copy-source-bucket`: nil (any bucket) for `*`.
    private func copySourceBucketSet() throws -> Set<String>? {
        if copySourceBuckets.contains("*") { return nil }
        for bucket in copySourceBuckets {
            if let problem = RequestLimits.bucketNameProblem(bucket) { throw ValidationError("--copy-source-bucket: \(problem.message)") }
        }
        return Set(copySourceBuckets)
    }

    /// Refuses a data root through which requests could reach the worker's
    /// own files: its state, the handlers' output, the local store, secrets.
    private func checkDataRootExposure(_ configuration: WorkerConfiguration) throws {
        var guarded: [(option: String, path: String)] = [("--state-dir", configuration.stateDirectory.path),
                                                         ("--trigger-output-dir", configuration.triggerOutputDirectory.path)]
        if case .local(let store) = configuration.storage { guarded.append(("--local-store", store.path)) }
        for (option, file) in [("--admin-token-file", adminTokenFile), ("--ingest-token-file", ingestTokenFile),
                               ("--jwt-secret-file", jwtSecretFile), ("--callback-secret-file", callbackSecretFile)] {
            if let file { guarded.append((option, file)) }
        }
        let home = ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory()
        let credentials = environment("AWS_SHARED_CREDENTIALS_FILE") ?? "\(home)/.aws/credentials"
        if FileManager.default.fileExists(atPath: credentials) { guarded.append(("the AWS credentials file", credentials)) }
        if let problem = DataRootExposure.problem(dataRoot: configuration.dataRoot, paths: guarded) { throw ValidationError(problem) }
    }

    /// The callback secret (file, or FERRY_CALLBACK_SECRET) and policy.
    func callbackSettings() throws -> CallbackSettings {
        var settings = CallbackSettings()
        if let file = callbackSecretFile {
            let text = try CommandLineFile.text(file, "the callback secret file")
            settings.secret = text.trimmingCharacters(in: .whitespacesAndNewlines)
        } else if let secret = environment("FERRY_CALLBACK_SECRET") {
            settings.secret = secret
        }
        if let secret = settings.secret, secret.utf8.count < 16 {
            throw ValidationError("the callback secret must be at least 16 bytes")
        }
        settings.policy.allowedHosts = callbackHosts
        do {
            settings.policy.allowedRanges = try callbackRanges.map { range throws(ConfigurationError) in try AddressRange(range) }
        } catch {
            throw ValidationError(error.description)
        }
        return settings
    }

    /// How callers share the data root: by access level whenever tokens
    /// prove who calls, for a shared root would let any caller read every
    /// other caller's files; shared otherwise unless asked.
    func layout(auth: AuthConfiguration.Mode) throws -> DataRootLayout {
        guard let text = dataRootLayout else { return auth == .jwt ? .accessLevels : .shared }
        guard let layout = DataRootLayout(rawValue: text) else {
            throw ValidationError("--data-root-layout must be shared or access-levels, not '\(text.prefix(80))'")
        }
        if layout == .shared && auth == .jwt {
            throw ValidationError("--data-root-layout shared cannot go with --auth-mode jwt: every caller could read and replace every other caller's files; use access-levels")
        }
        return layout
    }

    func authConfiguration() throws -> AuthConfiguration {
        var auth = AuthConfiguration()
        let mode = authMode ?? "none"
        guard let parsed = AuthConfiguration.Mode(rawValue: mode) else { throw ValidationError("--auth-mode must be none or jwt") }
        auth.mode = parsed
        func read(_ path: String, _ what: String) throws -> String {
            let text = try CommandLineFile.text(path, "\(what) file")
            return text
        }
        auth.hmacSecret = try jwtSecretFile.map { try read($0, "JWT secret").trimmingCharacters(in: .whitespacesAndNewlines) }
            ?? environment("FERRY_JWT_SECRET")
        auth.publicKeyPEM = try jwtPublicKey.map { try read($0, "public key") }
        auth.jwksJSON = try jwtJWKS.map { try read($0, "JWKS") }
        auth.issuer = jwtIssuer
        auth.audience = jwtAudience
        if let claim = jwtIdentityClaim { auth.identityClaim = claim }
        auth.allowGuests = allowGuests
        auth.guestIssuer = jwtGuestIssuer
        if auth.mode == .none && (allowGuests || jwtGuestIssuer != nil) {
            throw ValidationError("--allow-guests and --jwt-guest-issuer apply to --auth-mode jwt (without it, requests without identityId are guests already)")
        }
        if auth.mode == .jwt && auth.hmacSecret == nil && auth.publicKeyPEM == nil && auth.jwksJSON == nil {
            throw ValidationError("--auth-mode jwt needs --jwt-secret-file, FERRY_JWT_SECRET, --jwt-public-key or --jwt-jwks")
        }
        return auth
    }
}

/// The HTTP port's admin token, from a file or FERRY_ADMIN_TOKEN: at least
/// 16 characters (a guessable token is no protection), surrounding
/// whitespace ignored.
enum AdminToken {
    static func load(file: String?, environment: String?) throws -> String? {
        var token = environment?.isEmpty == true ? nil : environment  // an empty variable is an unset one (compose)
        if let file {
            let text = try CommandLineFile.text(file, "the admin token file")
            token = text
        }
        guard let token = token?.trimmingCharacters(in: .whitespacesAndNewlines) else { return nil }
        guard token.count >= 16, token.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw ValidationError("the admin token must be at least 16 printable ASCII characters without spaces")
        }
        return token
    }
}

/// The ingest token, from a file or FERRY_INGEST_TOKEN: at least 16 printable
/// characters that can stand in a URL query (RGW sends it as `?token=`).
enum IngestToken {
    static func load(file: String?, environment: String?) throws -> String? {
        var token = environment?.isEmpty == true ? nil : environment
        if let file {
            let text = try CommandLineFile.text(file, "the ingest token file")
            token = text
        }
        guard let token = token?.trimmingCharacters(in: .whitespacesAndNewlines) else { return nil }
        guard token.count >= 16, token.unicodeScalars.allSatisfy({ CharacterSet.alphanumerics.contains($0) || "-_.~".unicodeScalars.contains($0) }),
              token.allSatisfy(\.isASCII) else {
            throw ValidationError("the ingest token must be at least 16 characters of A-Z a-z 0-9 - _ . ~")
        }
        return token
    }
}

/// Builds the trigger registry from `triggers/Registrations.swift` and the
/// targets declared in the configuration file's `triggers:` list.
enum TriggerSetup {
    static func registry(environment: TriggerEnvironment, transport: CurlTransport) throws -> TriggerRegistry {
        var registry = TriggerRegistry()
        do {
            // Declared targets first: a catch-all example in triggers/ steps aside for them.
            for target in ProcessSettings.sources?.targets ?? [] {
                try target.register(into: &registry, http: transport)
            }
            try Registrations.register(into: &registry, environment: environment)
        } catch {
            throw ValidationError("trigger registration failed: \(error)")
        }
        return registry
    }

    static func registry(dataRoot: DataRoot, outputDirectory: URL, region: String, http: CurlTransport) throws -> TriggerRegistry {
        try registry(environment: .worker(dataRoot: URL(fileURLWithPath: dataRoot.path), outputDirectory: outputDirectory,
                                          region: region, store: nil, transport: http), transport: http)
    }
}

