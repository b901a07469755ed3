import FerryCore
import Foundation

/// The seam between the transfer engine and a storage backend. `S3Client`
/// speaks S3 over HTTP; `LocalObjectStore` keeps objects in a directory (the
/// embedded default). Both throw `FerryError` with S3's codes.
public protocol ObjectStore: Sendable {
    /// Stores `body` as `bucket/key` in one request.
    func putObject(_ input: PutObjectInput, body: ObjectBody) async throws(FerryError) -> ObjectWriteResult
    /// Writes the object's bytes into `descriptor` from offset 0 and returns its attributes.
    func getObject(bucket: String, key: String, into descriptor: Int32) async throws(FerryError) -> ObjectAttributes
    /// The object's attributes, or nil when there is none.
    func headObject(bucket: String, key: String) async throws(FerryError) -> ObjectAttributes?
    /// Copies `source` to `destination` inside storage (no bytes pass through Ferry).
    /// The copy keeps the source's content type and metadata.
    func copyObject(from source: ObjectLocation, to destination: ObjectLocation) async throws(FerryError) -> ObjectWriteResult
    /// Removes the object; removing an absent object succeeds, as in S3.
    func deleteObject(bucket: String, key: String) async throws(FerryError) -> ObjectWriteResult
}

/// A bucket and a key.
public struct ObjectLocation: Sendable, Hashable, CustomStringConvertible {
    public var bucket: String
    public var key: String
    public init(bucket: String, key: String) { self.bucket = bucket; self.key = key }
    public var description: String { "s3://\(bucket)/\(key)" }

    /// Parses `s3://bucket/key`.
    public init(s3URI: String) throws(FerryError) {
        guard s3URI.hasPrefix("s3://") else { throw FerryError(.invalidRequest, "'\(s3URI)' is not an s3://bucket/key URI") }
        let rest = s3URI.dropFirst(5)
        guard let slash = rest.firstIndex(of: "/"), slash != rest.startIndex, rest.index(after: slash) != rest.endIndex else {
            throw FerryError(.invalidRequest, "'\(s3URI)' names no bucket and key")
        }
        bucket = String(rest[..<slash])
        key = String(rest[rest.index(after: slash)...])
    }
}

/// The bytes of an upload.
public enum ObjectBody: Sendable {
    case bytes([UInt8])
    /// An open file, read from offset 0 to `length`.
    case file(descriptor: Int32, length: Int64)

    public var length: Int64 {
        switch self {
        case .bytes(let b): return Int64(b.count)
        case .file(_, let length): return length
        }
    }
}

public struct PutObjectInput: Sendable {
    public var bucket: String
    public var key: String
    public var contentType: String?
    /// User metadata, sent as `x-amz-meta-<name>`.
    public var metadata: [String: String]

    public init(bucket: String, key: String, contentType: String? = nil, metadata: [String: String] = [:]) {
        self.bucket = bucket; self.key = key; self.contentType = contentType; self.metadata = metadata
    }
}

/// What storage reports after a write or delete.
public struct ObjectWriteResult: Sendable, Hashable {
    public var eTag: String?
    public var versionId: String?
    /// `x-amz-request-id` and `x-amz-id-2`, carried into S3 events.
    public var requestId: String
    public var hostId: String

    public init(eTag: String?, versionId: String?, requestId: String, hostId: String) {
        self.eTag = eTag; self.versionId = versionId; self.requestId = requestId; self.hostId = hostId
    }
}

public struct ObjectAttributes: Sendable, Hashable {
    public var size: Int64
    public var eTag: String?
    public var contentType: String?
    public var metadata: [String: String]
    public var lastModified: Date?
    public var versionId: String?

    public init(size: Int64, eTag: String?, contentType: String?, metadata: [String: String],
                lastModified: Date?, versionId: String?) {
        self.size = size; self.eTag = eTag; self.contentType = contentType; self.metadata = metadata
        self.lastModified = lastModified; self.versionId = versionId
    }
}
