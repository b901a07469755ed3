import FerryCore
import Foundation

/// The seam between the transfer engine and a storage backend. `S3Client`
/// speaks S3 over HTTP; `LocalObjectStore` keeps objects in a directory (the
/// embedded default). Both throw `FerryError` with S3's codes and report bytes
/// moved to an optional `TransferMeter`.
public protocol ObjectStore: Sendable {
    /// Stores `body` as one object in one request. With `input.ifNoneMatch`
    /// it fails with `preconditionFailed` when the key holds an object, if the
    /// store checks that (`conditionalWrites`).
    func putObject(_ input: PutObjectInput, body: ObjectBody, progress: TransferMeter?) async throws(FerryError) -> ObjectWriteResult
    /// Writes the object's bytes (or `input.range` of them) into `descriptor` from `offset`.
    /// Fails with `preconditionFailed` when `input.ifMatch` no longer names the object.
    func getObject(_ input: GetObjectInput, into descriptor: Int32, at offset: Int64,
                   progress: TransferMeter?) async throws(FerryError) -> ObjectAttributes
    /// The object's attributes, or nil when there is none. `headers` may carry
    /// the SSE-C key (S3 refuses a HEAD of an SSE-C object without it); other headers are ignored.
    func headObject(bucket: String, key: String, headers: [String: String]) async throws(FerryError) -> ObjectAttributes?
    /// The object's stored checksum of all its bytes, while it is the version
    /// `eTag` names (else `preconditionFailed`): nil when it has none, or only
    /// a checksum of its parts' checksums (a composite, `…-N`). S3 names it on
    /// a GET of the whole object, not of a range, so a download in ranges asks
    /// for it here (a HEAD with `x-amz-checksum-mode: ENABLED`). Of `headers`,
    /// the SSE-C ones are sent. Stores that keep no checksums answer nil.
    func wholeObjectChecksum(_ location: ObjectLocation, eTag: String, headers: [String: String]) async throws(FerryError) -> WholeObjectChecksum?
    /// Copies `input.source` inside storage (no bytes pass through Ferry) to the
    /// object `input.destination` describes: its content type, metadata and
    /// headers replace the source's (S3's `x-amz-metadata-directive: REPLACE`).
    func copyObject(_ input: CopyObjectInput) async throws(FerryError) -> ObjectWriteResult
    /// Removes the object; removing an absent object succeeds, as in S3.
    func deleteObject(bucket: String, key: String) async throws(FerryError) -> ObjectWriteResult

    // MARK: Multipart upload

    /// Starts a multipart upload and returns its upload id. With a CRC as
    /// `input.checksum`, the store is asked to keep a CRC of the whole object
    /// (S3's `FULL_OBJECT` checksum type; see `WholeObjectChecksum`).
    func createMultipartUpload(_ input: PutObjectInput) async throws(FerryError) -> String
    /// Uploads one part (1…10,000) of at most 5 GiB. Of `headers`, those that S3
    /// wants on every part (SSE-C) are sent.
    func uploadPart(_ location: ObjectLocation, uploadId: String, partNumber: Int, body: ObjectBody,
                    checksum: ChecksumAlgorithm?, headers: [String: String], progress: TransferMeter?) async throws(FerryError) -> CompletedPart
    /// Copies `range` of `source` into one part, inside storage (UploadPartCopy).
    /// Of `headers`, the SSE-C ones (the destination's key, and the source's
    /// as `x-amz-copy-source-server-side-encryption-customer-*`) are sent.
    func uploadPartCopy(_ location: ObjectLocation, uploadId: String, partNumber: Int, source: ObjectLocation,
                        range: ClosedRange<Int64>, headers: [String: String]) async throws(FerryError) -> CompletedPart
    /// Assembles the parts, in part-number order, into the object. Of
    /// `headers`, the SSE-C ones are sent with the request, and read the
    /// object back where the store's answer does not name its ETag.
    /// `wholeChecksum`, for an upload started with a CRC, is the whole
    /// object's CRC made from the parts' (the store refuses to assemble an
    /// object whose bytes do not have it).
    func completeMultipartUpload(_ location: ObjectLocation, uploadId: String, parts: [CompletedPart],
                                 headers: [String: String], wholeChecksum: WholeObjectChecksum?) async throws(FerryError) -> ObjectWriteResult
    /// Discards the upload and its parts.
    func abortMultipartUpload(_ location: ObjectLocation, uploadId: String) async throws(FerryError)
    /// The parts stored so far.
    func listParts(_ location: ObjectLocation, uploadId: String) async throws(FerryError) -> [CompletedPart]
    /// Uploads in progress whose key starts with `prefix`.
    func listMultipartUploads(bucket: String, prefix: String) async throws(FerryError) -> [MultipartUploadSummary]
    /// Succeeds when the storage answers at all (readiness); throws when it cannot be reached.
    func probe() async throws(FerryError)
    /// One page of the objects whose key starts with `prefix`, in key order
    /// (UTF-8 bytes, as ListObjectsV2): at most `maxKeys`, after `continuation`
    /// (the previous page's `next`).
    func listObjects(bucket: String, prefix: String, continuation: String?, maxKeys: Int) async throws(FerryError) -> ObjectListing
    /// Whether `putObject` with `ifNoneMatch` is refused on a key that holds an object.
    var conditionalWrites: ConditionalWrites { get }
}

extension ObjectStore {
    public func completeMultipartUpload(_ location: ObjectLocation, uploadId: String,
                                        parts: [CompletedPart]) async throws(FerryError) -> ObjectWriteResult {
        try await completeMultipartUpload(location, uploadId: uploadId, parts: parts, headers: [:], wholeChecksum: nil)
    }
    public func probe() async throws(FerryError) {}
    public func wholeObjectChecksum(_ location: ObjectLocation, eTag: String, headers: [String: String]) async throws(FerryError) -> WholeObjectChecksum? {
        nil
    }
    public var conditionalWrites: ConditionalWrites { .unsupported }
    public func listObjects(bucket: String, prefix: String, continuation: String?, maxKeys: Int) async throws(FerryError) -> ObjectListing {
        throw FerryError(.unsupportedOperation, "this store cannot list objects")
    }
}

/// A page of a listing.
public struct ObjectListing: Sendable {
    public struct Item: Sendable, Hashable {
        public var key: String
        public var size: Int64
        /// Without quotes.
        public var eTag: String?
        public var lastModified: Date?
        public init(key: String, size: Int64, eTag: String?, lastModified: Date?) {
            self.key = key; self.size = size; self.eTag = eTag; self.lastModified = lastModified
        }
    }
    public var items: [Item]
    /// Where the next page starts; nil after the last.
    public var next: String?
    public init(items: [Item], next: String?) { self.items = items; self.next = next }
}

/// A bucket and a key.
public struct ObjectLocation: Sendable, Hashable, CustomStringConvertible {
    public var bucket: String
    public var key: String
    public init(bucket: String, key: String) { self.bucket = bucket; self.key = key }
    public var description: String { "s3://\(bucket)/\(key)" }

    /// Throws when a bucket or key breaks Ferry's rules (`RequestLimits.bucketNameProblem`,
    /// `ObjectKeyRule`). Every store checks what it is asked to address, so no
    /// caller (worker, `ferry cp`, `ferry presign`, a trigger) can reach another key.
    public static func checkAddress(bucket: String?, key: String?) throws(FerryError) {
        if let bucket, let problem = RequestLimits.bucketNameProblem(bucket) { throw problem }
        if let key, let problem = ObjectKeyRule.violation(of: key) { throw problem }
    }

    /// Parses `s3://bucket/key`; both must pass `checkAddress`.
    public init(s3URI: String) throws(FerryError) {
        guard s3URI.hasPrefix("s3://") else { throw FerryError(.invalidRequest, "'\(s3URI)' is not an s3://bucket/key URI") }
        let rest = s3URI.dropFirst(5)
        guard let slash = rest.firstIndex(of: "/"), slash != rest.startIndex, rest.index(after: slash) != rest.endIndex else {
            throw FerryError(.invalidRequest, "'\(s3URI)' names no bucket and key")
        }
        bucket = String(rest[..<slash])
        key = String(rest[rest.index(after: slash)...])
        try Self.checkAddress(bucket: bucket, key: key)
    }
}

/// The bytes of an upload or of one part.
public enum ObjectBody: Sendable {
    case bytes([UInt8])
    /// `length` bytes of an open file from `offset`, read with pread (never all in memory).
    case file(descriptor: Int32, offset: Int64, length: Int64)

    public var length: Int64 {
        switch self {
        case .bytes(let b): return Int64(b.count)
        case .file(_, _, let length): return length
        }
    }

    /// Feeds the body's bytes to `consume`, 1 MiB at a time.
    public func readAll(_ consume: (UnsafeRawBufferPointer) -> Void) throws(FerryError) { try read(consume) }

    package func read(_ consume: (UnsafeRawBufferPointer) -> Void) throws(FerryError) {
        switch self {
        case .bytes(let bytes):
            bytes.withUnsafeBytes(consume)
        case .file(let fd, let offset, let length):
            try FileCopy.read(fd, offset: offset, length: length, consume)
        }
    }
}

public struct PutObjectInput: Sendable {
    public var bucket: String
    public var key: String
    public var contentType: String?
    /// User metadata, sent as `x-amz-meta-<name>`.
    public var metadata: [String: String]
    /// Further allow-listed headers (SSE, cache-control, storage class, …), sent as given.
    public var headers: [String: String]
    /// The additional checksum stored with the object (or with each part).
    public var checksum: ChecksumAlgorithm?
    /// `putObject` only: write only if the key holds no object (`If-None-Match: *`).
    public var ifNoneMatch = false

    public init(bucket: String, key: String, contentType: String? = nil, metadata: [String: String] = [:],
                headers: [String: String] = [:], checksum: ChecksumAlgorithm? = nil) {
        self.bucket = bucket; self.key = key; self.contentType = contentType; self.metadata = metadata
        self.headers = headers; self.checksum = checksum
    }

    public var location: ObjectLocation { ObjectLocation(bucket: bucket, key: key) }

    /// The HTTP headers that describe the new object: content type,
    /// `x-amz-meta-*` and the further headers. Every name is a token and every
    /// value passes `HeaderValueRule`, whoever built the input (a worker,
    /// `ferry cp`, a trigger): no value can add a header of its own. Both
    /// stores check this, so the local store refuses what S3 would receive.
    public func headerFields() throws(FerryError) -> [(String, String)] {
        var fields: [(String, String)] = []
        if let contentType { fields.append(("content-type", contentType)) }
        for (name, value) in metadata.sorted(by: { $0.key < $1.key }) {
            guard RequestLimits.isToken(name) else {
                throw FerryError(.invalidRequest, "metadata name '\(name.prefix(64))' is not a valid HTTP header name")
            }
            fields.append(("x-amz-meta-\(name.lowercased())", value))
        }
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            guard RequestLimits.isToken(name) else { throw FerryError(.invalidRequest, "header name '\(name.prefix(64))' is not valid") }
            fields.append((name.lowercased(), value))
        }
        for (name, value) in fields {
            if let problem = HeaderValueRule.violation(of: value, field: name) { throw problem }
        }
        return fields
    }
}

/// A copy inside storage.
public struct CopyObjectInput: Sendable {
    /// The header that makes a copy (or a part copied) depend on the source's
    /// ETag, as S3's `x-amz-copy-source-if-match`; every store honours it.
    public static let sourceIfMatchHeader = "x-amz-copy-source-if-match"
    public var source: ObjectLocation
    /// The new object: bucket, key, content type, metadata and headers (SSE-C
    /// of the destination among them). Nothing of the source's metadata is kept
    /// unless it is here.
    public var destination: PutObjectInput
    /// The source's SSE-C key, as `x-amz-copy-source-server-side-encryption-customer-*`.
    public var sourceHeaders: [String: String]

    public init(source: ObjectLocation, destination: PutObjectInput, sourceHeaders: [String: String] = [:]) {
        self.source = source; self.destination = destination; self.sourceHeaders = sourceHeaders
    }
}

public struct GetObjectInput: Sendable {
    public var bucket: String
    public var key: String
    /// Inclusive byte range; nil for the whole object.
    public var range: ClosedRange<Int64>?
    /// Only if the object still has this ETag (S3's `If-Match`).
    public var ifMatch: String?
    /// Headers such as SSE-C keys, sent as given.
    public var headers: [String: String]
    /// Ask for the object's stored additional checksum (`x-amz-checksum-mode: ENABLED`).
    public var checksumMode: Bool
    /// Sees the answer while it arrives.
    public var observer: GetObjectObserver?
    /// The most body bytes taken from a server before the request fails (nil:
    /// the range's length; no limit for a whole object). Bounds what a server
    /// can write to disk where the caller knows how much it can be.
    public var maxBytes: Int64?

    public init(bucket: String, key: String, range: ClosedRange<Int64>? = nil, ifMatch: String? = nil,
                headers: [String: String] = [:], checksumMode: Bool = false, observer: GetObjectObserver? = nil,
                maxBytes: Int64? = nil) {
        self.bucket = bucket; self.key = key; self.range = range; self.ifMatch = ifMatch; self.headers = headers
        self.checksumMode = checksumMode; self.observer = observer; self.maxBytes = maxBytes
    }
}

/// Sees a GetObject while it runs: `attributes` (with the whole object's size,
/// also for a range) before any byte is written, so a download can start its
/// other ranges at once; then `body` with the bytes in order once they are in
/// the file, so they can be checked in the same pass. A store that copies locally may skip `body`; a
/// caller must not assume it saw every byte.
public struct GetObjectObserver: Sendable {
    public var attributes: @Sendable (ObjectAttributes) -> Void
    public var body: @Sendable (UnsafeRawBufferPointer) -> Void

    public init(attributes: @escaping @Sendable (ObjectAttributes) -> Void,
                body: @escaping @Sendable (UnsafeRawBufferPointer) -> Void = { _ in }) {
        self.attributes = attributes; self.body = body
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
    /// The whole object's size (from `Content-Range` for a ranged read).
    public var size: Int64
    public var eTag: String?
    public var contentType: String?
    public var metadata: [String: String]
    public var lastModified: Date?
    public var versionId: String?
    /// Bytes of body received by this request.
    public var bytesReceived: Int64
    /// Stored additional checksums the server returned (base64; composite ones end in `-<parts>`).
    public var checksums: [ChecksumAlgorithm: String] = [:]

    public init(size: Int64, eTag: String?, contentType: String?, metadata: [String: String],
                lastModified: Date?, versionId: String?, bytesReceived: Int64 = 0) {
        self.size = size; self.eTag = eTag; self.contentType = contentType; self.metadata = metadata
        self.lastModified = lastModified; self.versionId = versionId; self.bytesReceived = bytesReceived
    }
}

/// The checksum of a whole multipart object, made from its parts' CRCs
/// without reading a byte again (`ChecksumAlgorithm.combined`), for S3's
/// `FULL_OBJECT` checksum type: the object then carries a CRC of all its
/// bytes, which a download checks, where a `COMPOSITE` one (a checksum of the
/// parts' checksums, `…-N`) matches no download's bytes.
public struct WholeObjectChecksum: Sendable, Hashable {
    public var algorithm: ChecksumAlgorithm
    /// Base64, as S3 sends it.
    public var value: String

    public init(algorithm: ChecksumAlgorithm, value: String) {
        self.algorithm = algorithm; self.value = value
    }

    /// The whole object's CRC from `parts` (in part-number order, each with its
    /// size): nil unless every part carries a CRC of `algorithm`.
    public static func combining(_ parts: [CompletedPart], algorithm: ChecksumAlgorithm) -> WholeObjectChecksum? {
        let ordered = parts.sorted { $0.partNumber < $1.partNumber }
        var pieces: [(value: String, length: Int64)] = []
        for part in ordered {
            guard part.checksumAlgorithm == algorithm, let value = part.checksum else { return nil }
            pieces.append((value, part.size))
        }
        return algorithm.combined(pieces).map { WholeObjectChecksum(algorithm: algorithm, value: $0) }
    }
}

extension ObjectAttributes {
    /// The stored checksum of all the object's bytes among those the server
    /// named (a composite of parts, `…-N`, is not one); the first by name
    /// when it named several.
    public var wholeObjectChecksum: WholeObjectChecksum? {
        checksums.filter { !$0.value.contains("-") }.min { $0.key.rawValue < $1.key.rawValue }
            .map { WholeObjectChecksum(algorithm: $0.key, value: $0.value) }
    }
}

/// A part stored in a multipart upload.
public struct CompletedPart: Sendable, Hashable, Codable {
    public var partNumber: Int
    public var eTag: String
    public var size: Int64
    /// Base64 checksum value, when the part was uploaded with one.
    public var checksum: String?
    public var checksumAlgorithm: ChecksumAlgorithm?

    public init(partNumber: Int, eTag: String, size: Int64, checksum: String? = nil,
                checksumAlgorithm: ChecksumAlgorithm? = nil) {
        self.partNumber = partNumber; self.eTag = eTag; self.size = size; self.checksum = checksum
        self.checksumAlgorithm = checksumAlgorithm
    }
}

public struct MultipartUploadSummary: Sendable, Hashable {
    public var key: String
    public var uploadId: String
    public var initiated: Date?

    public init(key: String, uploadId: String, initiated: Date?) {
        self.key = key; self.uploadId = uploadId; self.initiated = initiated
    }
}

extension ObjectStore {
    /// Stores `body` in one request, without progress reporting.
    public func putObject(_ input: PutObjectInput, body: ObjectBody) async throws(FerryError) -> ObjectWriteResult {
        try await putObject(input, body: body, progress: nil)
    }

    /// Writes the whole object into `descriptor` from offset 0.
    public func getObject(bucket: String, key: String, into descriptor: Int32) async throws(FerryError) -> ObjectAttributes {
        try await getObject(GetObjectInput(bucket: bucket, key: key), into: descriptor, at: 0, progress: nil)
    }
}

extension ObjectStore {
    /// The object's attributes, or nil when there is none (no SSE-C key).
    public func headObject(bucket: String, key: String) async throws(FerryError) -> ObjectAttributes? {
        try await headObject(bucket: bucket, key: key, headers: [:])
    }
}
