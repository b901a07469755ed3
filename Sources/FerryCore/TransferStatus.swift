import Foundation

/// A lifecycle message on `<prefix>.status`, keyed by transfer id.
public struct TransferStatus: Sendable, Codable, Hashable {
    public enum State: String, Sendable, Codable, CaseIterable {
        case accepted, running, paused, completed, failed, cancelled, rejected

        /// No later status follows a terminal one.
        public var isTerminal: Bool {
            switch self {
            case .completed, .failed, .cancelled, .rejected: return true
            case .accepted, .running, .paused: return false
            }
        }
    }

    /// The object a finished transfer produced or read.
    public struct ObjectInfo: Sendable, Codable, Hashable {
        public var bucket: String
        public var key: String
        public var size: Int64?
        public var eTag: String?
        public var versionId: String?
        public init(bucket: String, key: String, size: Int64? = nil, eTag: String? = nil, versionId: String? = nil) {
            self.bucket = bucket; self.key = key; self.size = size; self.eTag = eTag; self.versionId = versionId
        }
    }

    public struct ErrorInfo: Sendable, Codable, Hashable {
        public var code: String
        public var message: String
        /// The most of an error's message a status carries: messages quote what
        /// others sent (a server's error, a key), and a status must stay small.
        public static let maxMessageBytes = 8 << 10
        public init(_ error: FerryError) {
            code = error.code.rawValue
            message = TextClip.clipped(error.message, toUTF8: Self.maxMessageBytes)
        }
    }

    public var id: String
    public var op: String?
    public var state: State
    public var bytesTransferred: Int64?
    public var totalBytes: Int64?
    public var attempt: Int?
    public var worker: String?
    /// ISO-8601 with milliseconds, UTC.
    public var time: String
    public var object: ObjectInfo?
    public var error: ErrorInfo?

    public init(id: String, op: String?, state: State, bytesTransferred: Int64? = nil,
                totalBytes: Int64? = nil, attempt: Int? = nil, worker: String? = nil,
                time: Date = Date(), object: ObjectInfo? = nil, error: FerryError? = nil) {
        self.id = id; self.op = op; self.state = state
        self.bytesTransferred = bytesTransferred; self.totalBytes = totalBytes
        self.attempt = attempt; self.worker = worker; self.time = Timestamp.iso8601(time)
        self.object = object; self.error = error.map(ErrorInfo.init)
    }
}
