import Foundation

/// A transfer request as producers write it on `<prefix>.requests` (see
/// docs/producers/requests.md). Unknown fields are ignored.
public struct TransferRequest: Sendable, Codable, Hashable {
    public var id: String
    public var op: TransferOperation
    public var bucket: String
    /// The user's key, before the access-level prefix.
    public var key: String
    public var accessLevel: AccessLevel?
    public var identityId: String?
    public var targetIdentityId: String?
    public var source: String?
    /// Copy only: the level of the source, whose key in `source` is then a
    /// user key (as Amplify's `Storage.copy` names it); absent, `source` holds
    /// the full S3 key and its level comes from the layout.
    public var sourceAccessLevel: AccessLevel?
    /// Copy only: the owner of a protected or private source (default: the caller).
    public var sourceIdentityId: String?
    public var destination: String?
    public var contentType: String?
    public var metadata: [String: String]?
    public var headers: [String: String]?
    public var options: TransferOptions?
    public var auth: String?
    /// Where the terminal status is also delivered: `kafka:<topic>` or an https URL (`CompletionCallback`).
    public var callback: String?

    public init(id: String, op: TransferOperation, bucket: String, key: String,
                accessLevel: AccessLevel? = nil, identityId: String? = nil,
                targetIdentityId: String? = nil, source: String? = nil,
                destination: String? = nil, contentType: String? = nil,
                metadata: [String: String]? = nil, headers: [String: String]? = nil,
                options: TransferOptions? = nil, auth: String? = nil,
                sourceAccessLevel: AccessLevel? = nil, sourceIdentityId: String? = nil, callback: String? = nil) {
        self.id = id; self.op = op; self.bucket = bucket; self.key = key
        self.accessLevel = accessLevel; self.identityId = identityId
        self.targetIdentityId = targetIdentityId; self.source = source
        self.destination = destination; self.contentType = contentType
        self.metadata = metadata; self.headers = headers; self.options = options
        self.auth = auth
        self.sourceAccessLevel = sourceAccessLevel; self.sourceIdentityId = sourceIdentityId
        self.callback = callback
    }

    /// The level in force (`guest` when absent).
    public var effectiveAccessLevel: AccessLevel { accessLevel ?? .guest }

    /// The Kafka key producers use: `bucket/key` as written.
    public var kafkaKey: String { "\(bucket)/\(key)" }
}

/// Per-request tuning; absent fields take the worker's defaults.
public struct TransferOptions: Sendable, Codable, Hashable {
    public var partSizeBytes: Int?
    public var partConcurrency: Int?
    public var retryLimit: Int?
    public var timeoutSeconds: Double?
    public var accelerate: Bool?
    public var checksumAlgorithm: String?

    public init(partSizeBytes: Int? = nil, partConcurrency: Int? = nil, retryLimit: Int? = nil,
                timeoutSeconds: Double? = nil, accelerate: Bool? = nil, checksumAlgorithm: String? = nil) {
        self.partSizeBytes = partSizeBytes; self.partConcurrency = partConcurrency
        self.retryLimit = retryLimit; self.timeoutSeconds = timeoutSeconds
        self.accelerate = accelerate; self.checksumAlgorithm = checksumAlgorithm
    }
}
