/// The one error type of Ferry: a stable `code` for programs (carried unchanged
/// by statuses and DLQ headers) and a `message` for people.
public struct FerryError: Error, Sendable, Hashable, Codable, CustomStringConvertible {
    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }

    /// The server gave no answer at all: a refused, reset or silent connection,
    /// a TLS failure, or no credentials to sign the request with. Any answer,
    /// even a refusal or a 503, is not this.
    public var isNoAnswer: Bool { code == .connectionError || code == .credentialsUnavailable }

    /// The failure is an upload source's (an `https://` source the worker
    /// fetches), not the store's: it says nothing of the store's health. Not
    /// encoded: statuses and DLQ records carry the code and the message.
    public var isSourceFailure = false

    /// The store gave no answer: what outage checks act on. A source that
    /// gives none is the transfer's own failure, retried and reported as such.
    public var isStoreNoAnswer: Bool { isNoAnswer && !isSourceFailure }

    private enum CodingKeys: String, CodingKey { case code, message }

    /// Stable error codes. Names follow S3's where one exists.
    public struct Code: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The message is not a valid JSON request.
        public static let malformedRequest = Code(rawValue: "MalformedRequest")
        /// The request parsed but breaks a rule of the contract.
        public static let invalidRequest = Code(rawValue: "InvalidRequest")
        /// The `op` is not one Ferry knows.
        public static let unsupportedOperation = Code(rawValue: "UnsupportedOperation")
        /// A local path escapes the data root or does not exist.
        public static let invalidPath = Code(rawValue: "InvalidPath")
        public static let accessDenied = Code(rawValue: "AccessDenied")
        /// S3's limits, with S3's codes.
        public static let keyTooLong = Code(rawValue: "KeyTooLongError")
        public static let metadataTooLarge = Code(rawValue: "MetadataTooLarge")
        public static let invalidBucketName = Code(rawValue: "InvalidBucketName")
        /// A request message larger than the worker accepts.
        public static let requestTooLarge = Code(rawValue: "RequestTooLarge")
        /// A remote (`https://`) source that policy refuses: disabled, host not allowed,
        /// or an address in a loopback, link-local or private range.
        public static let forbiddenSource = Code(rawValue: "ForbiddenSource")
        /// A source larger than its cap.
        public static let sourceTooLarge = Code(rawValue: "SourceTooLarge")
        public static let noSuchKey = Code(rawValue: "NoSuchKey")
        public static let noSuchBucket = Code(rawValue: "NoSuchBucket")
        public static let slowDown = Code(rawValue: "SlowDown")
        /// The object changed since the transfer started (`If-Match` failed).
        public static let preconditionFailed = Code(rawValue: "PreconditionFailed")
        public static let invalidRange = Code(rawValue: "InvalidRange")
        /// The multipart upload is gone (completed or aborted).
        public static let noSuchUpload = Code(rawValue: "NoSuchUpload")
        /// A body did not match its checksum.
        public static let badDigest = Code(rawValue: "BadDigest")
        /// The transfer was cancelled (API, control topic or `ferry cancel`).
        public static let cancelled = Code(rawValue: "Cancelled")
        /// The transfer ran past its `timeoutSeconds`.
        public static let timedOut = Code(rawValue: "TimedOut")
        /// The storage answered with an error Ferry has no better code for.
        public static let storageError = Code(rawValue: "StorageError")
        /// Ferry could not obtain credentials for storage (STS, the container or
        /// instance metadata endpoint, a credential process): tried again, as the
        /// source of temporary credentials is usually only briefly away.
        public static let credentialsUnavailable = Code(rawValue: "CredentialsUnavailable")
        /// The connection to storage failed (DNS, refused, reset, timeout).
        public static let connectionError = Code(rawValue: "ConnectionError")
        /// A local file could not be read or written.
        public static let localIOError = Code(rawValue: "LocalIOError")
        /// A local source file was written while it was uploaded in parts: the
        /// upload is abandoned, never completed from a mix of two versions.
        public static let sourceChanged = Code(rawValue: "SourceChanged")
        /// Kafka refused or lost a message.
        public static let kafkaError = Code(rawValue: "KafkaError")
        public static let internalError = Code(rawValue: "InternalError")
        /// A message that was started the configured number of times without an
        /// outcome (each time its worker stopped): quarantined by the crash-loop breaker.
        public static let poisonMessage = Code(rawValue: "PoisonMessage")
    }
}
