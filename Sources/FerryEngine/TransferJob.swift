import FerryCore
import FerryStorage

/// A validated request with its resolved storage location, ready to run.
public struct TransferJob: Sendable {
    public var request: TransferRequest
    /// The full S3 key (access-level prefix included).
    public var objectKey: String
    /// For a copy: the source as the access rules resolved it (nil: `request.source` as written).
    public var copySource: ObjectLocation?
    /// The areas of the data root the request's caller may use, when the
    /// root is laid out by access level; nil when it is shared.
    public var localAreas: LocalAreas?

    public init(request: TransferRequest, objectKey: String, copySource: ObjectLocation? = nil, localAreas: LocalAreas? = nil) {
        self.request = request
        self.objectKey = objectKey
        self.copySource = copySource
        self.localAreas = localAreas
    }

    /// The object a copy reads.
    public func copySourceLocation() throws(FerryError) -> ObjectLocation {
        if let copySource { return copySource }
        guard let source = request.source else { throw FerryError(.invalidRequest, "copy needs a source s3://bucket/key") }
        return try ObjectLocation(s3URI: source)
    }
}

/// Bytes moved so far for one transfer.
public struct TransferProgress: Sendable, Hashable {
    public var bytesTransferred: Int64
    public var totalBytes: Int64?
    public init(bytesTransferred: Int64, totalBytes: Int64?) {
        self.bytesTransferred = bytesTransferred
        self.totalBytes = totalBytes
    }
}

/// What a finished transfer did, for its status and its S3 event.
public struct TransferOutcome: Sendable, Hashable {
    public var object: TransferStatus.ObjectInfo
    /// The S3 event this transfer causes (`ObjectCreated:Put`, `ObjectRemoved:Delete`, …); nil for reads.
    public var eventName: String?
    /// `x-amz-request-id` and `x-amz-id-2` of the request that made the change.
    public var requestId: String
    public var hostId: String
    public var bytesTransferred: Int64
    /// Times the whole transfer ran (1, or more when a download started over);
    /// retries of single requests happen inside a run and are not counted here.
    public var attempts: Int
    /// True when the object already held this transfer's bytes (a redelivered
    /// request) and nothing was sent again.
    public var alreadyStored = false
    /// The object's metadata as stored, when the transfer read it (for the markers).
    public var storedMetadata: [String: String] = [:]
    /// For writes: what the key held just before (HEAD before the write), nil
    /// when it held nothing; the old image of the `objects` stream record.
    public var previous: ObjectAttributes?
    /// False when the write had already happened (a redelivery), so what the
    /// key held before it is no longer known.
    public var previousKnown = true
    /// For writes: the content type and user metadata the object now has.
    public var contentType: String?
    public var metadata: [String: String] = [:]
}
