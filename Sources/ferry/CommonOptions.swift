import ArgumentParser
import FerryCore
import FerryEngine
import FerryKafka
import FerryS3
import FerryStorage
import Foundation
import FerryWorker
import Logging

/// Runs configuration code; a setting that cannot work becomes a usage error
/// (exit 64, the reason on stderr), as docs/cli.md documents.
func configured<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as ConfigurationError {
        throw ValidationError(error.description)
    } catch let error as FerryError {
        throw ValidationError(error.message)
    }
}

/// Reads the first set, non-empty environment variable of `names`.
func environment(_ names: String...) -> String? {
    let env = ProcessInfo.processInfo.environment
    for name in names { if let value = env[name], !value.isEmpty { return value } }
    return nil
}

struct KafkaOptions: ParsableArguments {
    @Option(name: .customLong("bootstrap-servers"), help: "Kafka brokers, HOST:PORT[,…] (env FERRY_BOOTSTRAP_SERVERS).")
    var bootstrapServers: String?

    @Option(name: .customLong("topic-prefix"), help: "Prefix of Ferry's topics (env FERRY_TOPIC_PREFIX; default ferry).")
    var topicPrefix: String?

    @Option(name: .customLong("kafka-property"), parsing: .singleValue,
            help: "A librdkafka property NAME=VALUE, e.g. security.protocol=SASL_SSL (repeatable).")
    var kafkaProperties: [String] = []

    var topics: Topics { Topics(prefix: topicPrefix ?? setting(.topicPrefix) ?? "ferry") }

    func configuration() throws -> KafkaConfiguration {
        guard let servers = bootstrapServers ?? setting(.bootstrapServers) else {
            throw ValidationError("no Kafka brokers: pass --bootstrap-servers or set FERRY_BOOTSTRAP_SERVERS")
        }
        return KafkaConfiguration(bootstrapServers: servers, try properties())
    }

    func properties() throws -> [String: String] {
        var pairs = kafkaProperties
        Resolve.list(&pairs, .kafkaProperties)
        return try NameValuePairs.parse(pairs, option: "--kafka-property")
    }

    /// How long a command that sends (`enqueue`, `pause`, `items put`, …) waits
    /// for Kafka to take a message, unless `message.timeout.ms` is given:
    /// librdkafka's default, 5 minutes, kept a mistyped broker address silent
    /// for that long. A worker keeps the default (its outbox retries anyway).
    static let commandDeliveryTimeout: Duration = .seconds(30)

    /// `configuration()` for a command's short-lived producer.
    func commandConfiguration() throws -> KafkaConfiguration {
        try configuration().withDeliveryTimeout(Self.commandDeliveryTimeout)
    }

    mutating func resolve() {
        Resolve.string(&bootstrapServers, .bootstrapServers)
        Resolve.string(&topicPrefix, .topicPrefix)
        Resolve.list(&kafkaProperties, .kafkaProperties)
    }
}

struct S3Options: ParsableArguments {
    @Option(name: .customLong("s3-endpoint"), help: "S3 endpoint URL (env AWS_ENDPOINT_URL; default AWS for the region).")
    var endpoint: String?

    @Option(help: "Region for signing (env AWS_REGION or AWS_DEFAULT_REGION; default us-east-1).")
    var region: String?

    @Option(name: .customLong("addressing-style"), help: "path or virtual (default: path for a custom endpoint, virtual for AWS).")
    var addressingStyle: String?

    @Option(name: .customLong("access-key-id"), help: "Access key id (env AWS_ACCESS_KEY_ID).")
    var accessKeyId: String?

    @Option(name: .customLong("secret-access-key"), help: "Secret key (env AWS_SECRET_ACCESS_KEY; prefer the variable: flags show in ps).")
    var secretAccessKey: String?

    @Option(name: .customLong("session-token"), help: "Session token (env AWS_SESSION_TOKEN).")
    var sessionToken: String?

    @Option(help: "Profile of ~/.aws/config and ~/.aws/credentials: static keys, role_arn (source_profile, credential_source, web_identity_token_file) or credential_process (env AWS_PROFILE; default 'default').")
    var profile: String?

    @Option(name: .customLong("ca-bundle"), help: "PEM file of CAs to trust for HTTPS (env AWS_CA_BUNDLE).")
    var caBundle: String?

    @Option(name: .customLong("conditional-writes"),
            help: "auto, on or off: whether uploads of new keys may trust If-None-Match: * instead of a HEAD first (default auto: AWS and the local store yes, another store once it refused an overwrite with 412).")
    var conditionalWrites: String?

    @OptionGroup var limits: TransferLimitOptions

    /// The signing region, checked: it goes into every signature's scope and,
    /// without an endpoint, into the AWS host name.
    func validRegion() throws -> String {
        let region = region ?? setting(.region) ?? "us-east-1"
        if let problem = RegionRule.violation(of: region) { throw ValidationError(problem.message) }
        return region
    }

    /// The process's transport, made with these options' limits and CA bundle.
    func transport() throws -> CurlTransport {
        ProcessTransport.make(limits: try limits.transportLimits(), caBundle: caBundle ?? setting(.caBundle))
    }

    /// A client of the store these options name, on a transport of its own
    /// process (a command that talks to nothing else).
    func client() throws -> S3Client {
        let http = try transport()
        return S3Client(try configuration(transport: http), transport: http)
    }

    func configuration(transport: CurlTransport) throws -> S3Client.Configuration {
        let region = try validRegion()
        var endpoint: S3Endpoint
        if let url = self.endpoint ?? setting(.s3Endpoint) {
            endpoint = try S3Endpoint(url: url, style: .path)
        } else {
            endpoint = try S3Endpoint.aws(region: region)
        }
        if let style = addressingStyle ?? setting(.addressingStyle) {
            guard let parsed = S3Endpoint.AddressingStyle(rawValue: style) else {
                throw ValidationError("--addressing-style must be path or virtual")
            }
            endpoint.style = parsed
        }
        let caBundle = caBundle ?? setting(.caBundle)
        let conditional = conditionalWrites ?? setting(.conditionalWrites) ?? "auto"
        guard let conditionalMode = ConditionalWrites.Mode(rawValue: conditional) else {
            throw ValidationError("--conditional-writes must be auto, on or off, not '\(conditional)'")
        }
        let provider = try credentialProvider(transport: transport)
        return S3Client.Configuration(endpoint: endpoint, region: region, credentialProvider: provider,
                                      limits: try limits.transportLimits(), caBundle: caBundle, conditionalWrites: conditionalMode)
    }

    /// Keys given as flags, `FERRY_*`/`AWS_*` variables or in the configuration
    /// file come first; then AWS's chain (web identity, profiles, container,
    /// instance metadata: `CredentialChain`). STS and the container endpoint
    /// are reached through `transport`.
    func credentialProvider(transport: CurlTransport) throws -> any CredentialProvider {
        let id = accessKeyId ?? setting(.accessKeyId)
        let secret = secretAccessKey ?? setting(.secretAccessKey)
        var explicit: (AWSCredentials, source: String)?
        switch (id, secret) {
        case let (id?, secret?):
            // Where the key id came from, as the settings layer recorded it (flags fill in from the environment).
            let origin = ProcessSettings.resolved[.accessKeyId]?.1 ?? (accessKeyId != nil ? .flag : .environment)
            let label = switch origin {
            case .environment: "environment"
            case .file: "static keys (configuration file)"
            default: "static keys (flags)"
            }
            explicit = (AWSCredentials(accessKeyId: id, secretAccessKey: secret, sessionToken: sessionToken ?? setting(.sessionToken)), label)
        case (nil, nil):
            explicit = nil
        default:
            throw ValidationError("an access key id needs its secret access key and the other way round")
        }
        return try configured {
            try CredentialChain(region: try validRegion(), transport: transport)
                .provider(explicit: explicit, profile: profile ?? setting(.profile))
        }
    }

    mutating func resolve() throws {
        Resolve.string(&endpoint, .s3Endpoint)
        Resolve.string(&region, .region)
        Resolve.string(&addressingStyle, .addressingStyle)
        Resolve.string(&accessKeyId, .accessKeyId)
        Resolve.string(&secretAccessKey, .secretAccessKey)
        Resolve.string(&sessionToken, .sessionToken)
        Resolve.string(&profile, .profile)
        Resolve.string(&caBundle, .caBundle)
        Resolve.string(&conditionalWrites, .conditionalWrites)
        try limits.resolve()
    }
}

struct LogOptions: ParsableArguments {
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical (env FERRY_LOG_LEVEL; default info).")
    var level: String?

    @Option(name: .customLong("log-format"), help: "text or json: one JSON object per line (env FERRY_LOG_FORMAT; default text).")
    var format: String?

    mutating func resolve() {
        Resolve.string(&level, .logLevel)
        Resolve.string(&format, .logFormat)
    }

    /// Sets up swift-log for the process and returns the root logger.
    func bootstrap(label: String) throws -> Logger {
        try Self.bootstrap(label: label, level: level ?? setting(.logLevel) ?? "info", format: format ?? setting(.logFormat) ?? "text")
    }

    /// The level and format `bootstrap` would use, or the usage error it
    /// would throw (`ferry config check` asks without setting anything up).
    func validated() throws -> (Logger.Level, String) {
        try Self.validated(level: level ?? setting(.logLevel) ?? "info", format: format ?? setting(.logFormat) ?? "text")
    }

    static func validated(level text: String, format: String) throws -> (Logger.Level, String) {
        guard let level = Logger.Level(rawValue: text) else { throw ValidationError("unknown log level '\(text)'") }
        guard format == "text" || format == "json" else { throw ValidationError("--log-format must be text or json, not '\(format)'") }
        return (level, format)
    }

    /// For commands that choose their own defaults (`ferry dev`).
    static func bootstrap(label: String, level text: String, format: String) throws -> Logger {
        let (level, format) = try validated(level: text, format: format)
        ProcessLogging.choose(level: level, format: format)
        return Logger(label: label)
    }
}

/// Engine and connection settings shared by `ferry worker` and `ferry cp`.
struct TransferLimitOptions: ParsableArguments {
    @Option(name: .customLong("part-size"), help: "Part size, e.g. 8MiB (default 8MiB; uploads: at least 5MiB).")
    var partSize: String?

    @Option(name: .customLong("part-concurrency"), help: "Parts of one transfer in flight (default 5).")
    var partConcurrency: Int?

    @Option(name: .customLong("multipart-threshold"), help: "Uploads above this use multipart (default 16MiB).")
    var multipartThreshold: String?

    @Option(name: .customLong("max-connections"), help: "HTTP requests open at once, per process: S3, https sources and webhooks together (default 64).")
    var maxConnections: Int?

    @Option(name: .customLong("bandwidth-limit"), help: "Total bytes/s of the process's HTTP requests (S3, https sources, webhooks), e.g. 50MiB (default: none).")
    var bandwidthLimit: String?

    @Option(name: .customLong("max-buffered-bytes"), help: "Bytes held in memory by requests in flight, e.g. 64MiB (default 64MiB).")
    var maxBufferedBytes: String?

    @Option(name: .customLong("checksum"), help: "Additional upload checksum: CRC32C (default), CRC32, SHA256 or NONE.")
    var checksum: String?

    @Option(name: .customLong("retry-limit"), help: "Retries of a failed request (default 3).")
    var retryLimit: Int?

    @Option(name: .customLong("transfer-timeout"), help: "Seconds a whole transfer may take (default 3000).")
    var transferTimeout: Double?

    mutating func resolve() throws {
        Resolve.string(&partSize, .partSize)
        try Resolve.number(&partConcurrency, .partConcurrency)
        Resolve.string(&multipartThreshold, .multipartThreshold)
        try Resolve.number(&maxConnections, .maxConnections)
        Resolve.string(&bandwidthLimit, .bandwidthLimit)
        Resolve.string(&maxBufferedBytes, .maxBufferedBytes)
        Resolve.string(&checksum, .checksum)
        try Resolve.number(&retryLimit, .retryLimit)
        try Resolve.number(&transferTimeout, .transferTimeout)
    }

    func transportLimits() throws -> CurlTransport.Limits {
        var limits = CurlTransport.Limits()
        try requireRange(maxConnections, 1...4096, "--max-connections")
        if let maxConnections { limits.maxConnections = maxConnections }
        if let bandwidthLimit { limits.bandwidthBytesPerSecond = try ByteSize.parse(bandwidthLimit, option: "--bandwidth-limit") }
        if let maxBufferedBytes { limits.maxBufferedBytes = try ByteSize.parse(maxBufferedBytes, option: "--max-buffered-bytes") }
        return limits
    }

    /// The engine defaults with these options applied.
    func settings(_ base: TransferSettings = TransferSettings()) throws -> TransferSettings {
        var s = base
        do {
            s = try s.applying(TransferOptions(
                partSizeBytes: try partSize.map { Int(clamping: try ByteSize.parse($0, option: "--part-size")) },
                partConcurrency: partConcurrency, retryLimit: retryLimit, timeoutSeconds: transferTimeout,
                checksumAlgorithm: checksum))
        } catch let error as FerryError {
            throw ValidationError(RequestOptionFlags.namingFlags(error.message))
        }
        if let multipartThreshold {
            let threshold = try ByteSize.parse(multipartThreshold, option: "--multipart-threshold")
            try requireRange(threshold, 1...(5 << 30), "--multipart-threshold (bytes; S3's single PUT stops at 5 GiB)")
            s.multipartThreshold = threshold
        }
        return s
    }
}

/// `8MiB`, `64KiB`, `1GiB`, `1000` (bytes): 1 byte … 1 PiB.
enum ByteSize {
    static let largest: Int64 = 1 << 50

    static func parse(_ text: String, option: String) throws -> Int64 {
        let units: [(String, Int64)] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("GB", 1_000_000_000),
                                        ("MB", 1_000_000), ("KB", 1000), ("B", 1)]
        var bytes: Double?
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            if let n = Double(text.dropLast(suffix.count)) { bytes = n * Double(factor) }
            break
        }
        if bytes == nil, let n = Double(text) { bytes = n }
        guard let bytes, bytes.isFinite, bytes >= 1, bytes <= Double(largest) else {
            throw ValidationError("\(option) wants a size from 1 byte to 1PiB such as 8MiB, got '\(text)'")
        }
        return Int64(bytes)
    }
}

/// How long a command may wait (`--timeout`, `--for`): a tenth of a second to 30 days.
let waitSeconds: ClosedRange<Double> = 0.1...2_592_000

/// Refuses a numeric setting outside its documented range (or not a number, NaN).
func requireRange<T: Comparable>(_ value: T?, _ range: ClosedRange<T>, _ option: String) throws {
    guard let value else { return }
    guard range.contains(value) else {
        throw ValidationError("\(option) must be \(range.lowerBound)…\(range.upperBound), got \(value)")
    }
}

/// Repeatable `NAME=VALUE` options (`--kafka-property`, `--metadata`).
/// `--header NAME: VALUE` or `--header NAME=VALUE` (repeatable), as a
/// request's `headers`: checked against the allow-list and the header rule
/// before anything is sent, exit 64 with the reason.
enum RequestHeaders {
    static func parse(_ given: [String]) throws -> [String: String]? {
        guard !given.isEmpty else { return nil }
        var headers: [String: String] = [:]
        for item in given {
            // A name holds neither ':' nor '='; the first of them ends it (a base64 value may hold '=').
            guard let end = item.firstIndex(where: { $0 == ":" || $0 == "=" }), end != item.startIndex else {
                throw ValidationError("--header wants NAME: VALUE or NAME=VALUE, got '\(item)'")
            }
            let name = String(item[..<end]).trimmingCharacters(in: .whitespaces)
            let value = item[item.index(after: end)...].drop(while: { $0 == " " })
            headers[name] = String(value)
        }
        if let problem = HeaderPolicy.violation(in: headers) { throw ValidationError(problem.message) }
        return headers
    }
}

enum NameValuePairs {
    static func parse(_ pairs: [String], option: String) throws -> [String: String] {
        var result: [String: String] = [:]
        for pair in pairs {
            guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
                throw ValidationError("\(option) wants NAME=VALUE, got '\(pair)'")
            }
            result[String(pair[..<eq])] = String(pair[pair.index(after: eq)...])
        }
        return result
    }
}
