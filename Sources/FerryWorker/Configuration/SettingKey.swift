/// Every setting of `ferry worker`: its path in a configuration file, its
/// environment variables and its flag. One table, so the file schema, the
/// variables, `ferry config check` and docs/operators/configuration.md cannot drift apart.
public enum SettingKey: String, CaseIterable, Sendable {
    case bootstrapServers = "kafka.bootstrapServers"
    case topicPrefix = "kafka.topicPrefix"
    case kafkaProperties = "kafka.properties"
    case s3Endpoint = "s3.endpoint"
    case region = "s3.region"
    case addressingStyle = "s3.addressingStyle"
    case accessKeyId = "s3.accessKeyId"
    case secretAccessKey = "s3.secretAccessKey"
    case sessionToken = "s3.sessionToken"
    case profile = "s3.profile"
    case caBundle = "s3.caBundle"
    case conditionalWrites = "s3.conditionalWrites"
    case localStore = "storage.localStore"
    case dataRoot = "worker.dataRoot"
    case dataRootLayout = "worker.dataRootLayout"
    case stateDir = "worker.stateDir"
    case triggerOutputDir = "worker.triggerOutputDir"
    case workerId = "worker.id"
    case role = "worker.role"
    case maxTransfers = "worker.maxTransfers"
    case shutdownGrace = "worker.shutdownGrace"
    case rebalanceGrace = "worker.rebalanceGrace"
    case sweepAfter = "worker.sweepAfter"
    case finishedRetention = "worker.finishedRetention"
    case maxStarts = "worker.maxStarts"
    case partSize = "transfers.partSize"
    case partConcurrency = "transfers.partConcurrency"
    case multipartThreshold = "transfers.multipartThreshold"
    case maxConnections = "transfers.maxConnections"
    case bandwidthLimit = "transfers.bandwidthLimit"
    case maxBufferedBytes = "transfers.maxBufferedBytes"
    case checksum = "transfers.checksum"
    case retryLimit = "transfers.retryLimit"
    case transferTimeout = "transfers.timeout"
    case httpsSources = "sources.https"
    case httpsSourceHosts = "sources.hosts"
    case httpsSourceAllowRanges = "sources.allowRanges"
    case httpsSourceMaxBytes = "sources.maxBytes"
    case ingestTokenFile = "ingest.tokenFile"
    case ingestTopics = "ingest.topics"
    case ingestBuckets = "ingest.buckets"
    case ingestSettle = "ingest.settleSeconds"
    case tables = "items.tables"
    case callbackSecretFile = "callbacks.secretFile"
    case callbackHosts = "callbacks.hosts"
    case callbackAllowRanges = "callbacks.allowRanges"
    case prefixGuest = "access.prefixGuest"
    case prefixProtected = "access.prefixProtected"
    case prefixPrivate = "access.prefixPrivate"
    case prefixPassthrough = "access.prefixPassthrough"
    case guestPermissions = "access.guestPermissions"
    case authenticatedPermissions = "access.authenticatedPermissions"
    case copySourceBuckets = "access.copySourceBuckets"
    case authMode = "auth.mode"
    case jwtSecretFile = "auth.jwtSecretFile"
    case jwtPublicKey = "auth.jwtPublicKey"
    case jwtJWKS = "auth.jwtJWKS"
    case jwtIssuer = "auth.jwtIssuer"
    case jwtAudience = "auth.jwtAudience"
    case jwtIdentityClaim = "auth.jwtIdentityClaim"
    case allowGuests = "auth.allowGuests"
    case jwtGuestIssuer = "auth.jwtGuestIssuer"
    case httpAddress = "http.address"
    case adminTokenFile = "http.adminTokenFile"
    case logLevel = "log.level"
    case logFormat = "log.format"

    public enum Kind: Sendable { case scalar, list, map, flag }

    public var kind: Kind {
        switch self {
        case .kafkaProperties, .guestPermissions, .authenticatedPermissions: return .map
        case .httpsSourceHosts, .httpsSourceAllowRanges, .copySourceBuckets, .callbackHosts, .callbackAllowRanges, .ingestTopics, .ingestBuckets, .tables: return .list
        case .httpsSources, .prefixPassthrough, .allowGuests: return .flag
        default: return .scalar
        }
    }

    /// Values never printed (`ferry config check` shows `<redacted>`).
    public var isSecret: Bool { self == .secretAccessKey || self == .sessionToken }

    /// The command-line flag.
    public var flag: String {
        switch self {
        case .s3Endpoint: return "--s3-endpoint"
        case .kafkaProperties: return "--kafka-property"
        case .localStore: return "--local-store"
        case .workerId: return "--worker-id"
        case .transferTimeout: return "--transfer-timeout"
        case .httpsSources: return "--https-sources"
        case .httpsSourceHosts: return "--https-source-host"
        case .httpsSourceAllowRanges: return "--https-source-allow-range"
        case .httpsSourceMaxBytes: return "--https-source-max-bytes"
        case .jwtJWKS: return "--jwt-jwks"
        case .authMode: return "--auth-mode"
        case .httpAddress: return "--http-address"
        case .guestPermissions: return "--guest-permission"
        case .authenticatedPermissions: return "--authenticated-permission"
        case .copySourceBuckets: return "--copy-source-bucket"
        case .callbackHosts: return "--callback-host"
        case .ingestTopics: return "--ingest-topic"
        case .ingestBuckets: return "--ingest-bucket"
        case .tables: return "--table"
        case .ingestSettle: return "--ingest-settle"
        case .ingestTokenFile: return "--ingest-token-file"
        case .callbackSecretFile: return "--callback-secret-file"
        case .callbackAllowRanges: return "--callback-allow-range"
        case .logLevel: return "--log-level"
        case .logFormat: return "--log-format"
        default: return "--" + Self.kebab(String(rawValue.split(separator: ".").last!))
        }
    }

    /// Environment variables, first wins: `FERRY_<FLAG>`, then the AWS ones where AWS tools read them.
    public var environment: [String] {
        let own = "FERRY_" + flag.dropFirst(2).uppercased().replacingOccurrences(of: "-", with: "_")
        switch self {
        case .s3Endpoint: return [own, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]
        case .region: return [own, "AWS_REGION", "AWS_DEFAULT_REGION"]
        case .accessKeyId: return [own, "AWS_ACCESS_KEY_ID"]
        case .secretAccessKey: return [own, "AWS_SECRET_ACCESS_KEY"]
        case .sessionToken: return [own, "AWS_SESSION_TOKEN"]
        case .profile: return [own, "AWS_PROFILE"]
        case .caBundle: return [own, "AWS_CA_BUNDLE"]
        case .kafkaProperties: return ["FERRY_KAFKA_PROPERTIES"]
        case .httpsSourceHosts: return ["FERRY_HTTPS_SOURCE_HOSTS"]
        case .httpsSourceAllowRanges: return ["FERRY_HTTPS_SOURCE_ALLOW_RANGES"]
        case .guestPermissions: return ["FERRY_GUEST_PERMISSIONS"]
        case .authenticatedPermissions: return ["FERRY_AUTHENTICATED_PERMISSIONS"]
        case .copySourceBuckets: return ["FERRY_COPY_SOURCE_BUCKETS"]
        case .callbackHosts: return ["FERRY_CALLBACK_HOSTS"]
        case .ingestTopics: return ["FERRY_INGEST_TOPICS"]
        case .ingestBuckets: return ["FERRY_INGEST_BUCKETS"]
        case .tables: return ["FERRY_TABLES"]
        case .callbackAllowRanges: return ["FERRY_CALLBACK_ALLOW_RANGES"]
        default: return [own]
        }
    }

    static func kebab(_ camel: String) -> String {
        var out = ""
        for c in camel {
            if c.isUppercase { out += "-" + c.lowercased() } else { out.append(c) }
        }
        return out
    }
}
