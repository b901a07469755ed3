import FerryCore
import FerryStorage
import Foundation
import Logging
import Metrics
import FerryConcurrency

/// An S3 client over libcurl. Every request is signed when it is sent, so a
/// long transfer never outlives a signature. Bodies covered by Content-MD5 or an
/// additional checksum are sent with `UNSIGNED-PAYLOAD`, saving a SHA-256 pass.
public final class S3Client: ObjectStore {
    public struct Configuration: Sendable {
        public var endpoint: S3Endpoint
        public var region: String
        /// Asked for every request: temporary credentials renewed mid-transfer are used at once.
        public var credentials: any CredentialProvider
        public var timeouts: CurlTransport.Timeouts
        public var limits: CurlTransport.Limits
        /// PEM file of CAs to trust for HTTPS (default: the system's).
        public var caBundle: String?
        /// Whether uploads may trust `If-None-Match: *` (see `ConditionalWrites`).
        public var conditionalWrites: ConditionalWrites.Mode

        public init(endpoint: S3Endpoint, region: String, credentialProvider: any CredentialProvider,
                    timeouts: CurlTransport.Timeouts = .init(), limits: CurlTransport.Limits = .init(),
                    caBundle: String? = nil, conditionalWrites: ConditionalWrites.Mode = .auto) {
            self.endpoint = endpoint; self.region = region; self.credentials = credentialProvider
            self.timeouts = timeouts; self.limits = limits; self.caBundle = caBundle
            self.conditionalWrites = conditionalWrites
        }

        /// With fixed keys.
        public init(endpoint: S3Endpoint, region: String, credentials: AWSCredentials,
                    timeouts: CurlTransport.Timeouts = .init(), limits: CurlTransport.Limits = .init(),
                    caBundle: String? = nil) {
            self.init(endpoint: endpoint, region: region, credentialProvider: StaticCredentialProvider(credentials),
                      timeouts: timeouts, limits: limits, caBundle: caBundle)
        }
    }

    public let configuration: Configuration
    let transport: CurlTransport
    /// `auto` trusts AWS's own endpoints; another store's answer is learned.
    public let conditionalWrites: ConditionalWrites
    /// The time requests are signed with: the store's, once it refused this machine's.
    public let clock: SigningClock

    /// Requests go through `transport`, the process's one (so its connection
    /// and memory limits hold across every client); the configuration's
    /// timeouts, limits and CA bundle are what that transport is made with.
    public init(_ configuration: Configuration, transport: CurlTransport, clock: SigningClock? = nil) {
        self.configuration = configuration
        let endpoint = configuration.endpoint
        self.clock = clock ?? SigningClock(endpoint: "\(endpoint.scheme)://\(endpoint.hostHeader(bucket: nil))")
        conditionalWrites = ConditionalWrites(configuration.conditionalWrites, trusted: configuration.endpoint.isAWS)
        self.transport = transport
    }

    /// A signer with the keys in force now.
    func signer() async throws(FerryError) -> SigV4Signer {
        SigV4Signer(credentials: try await configuration.credentials.credentials(), region: configuration.region)
    }

    // MARK: Objects

    public func putObject(_ input: PutObjectInput, body: ObjectBody, progress: TransferMeter?) async throws(FerryError) -> ObjectWriteResult {
        let algorithm = input.checksum
        let digests = try await BlockingPool.shared.run { () throws(FerryError) -> BodyDigests in
            try BodyDigests.compute(body, checksum: algorithm)
        }
        var headers = try Self.objectHeaders(input)
        headers.append(("content-md5", Data(digests.md5).base64EncodedString()))
        if let algorithm = input.checksum, let value = digests.checksum {
            headers.append((algorithm.headerName, value))
            headers.append(("x-amz-sdk-checksum-algorithm", algorithm.rawValue))
        }
        if input.ifNoneMatch { headers.append(("if-none-match", "*")) }
        let response = try await send("PutObject", method: "PUT", bucket: input.bucket, key: input.key, headers: headers,
                                      body: body.httpBody, payloadHash: SigV4Signer.unsignedPayload, progress: progress)
        return writeResult(response)
    }

    public func getObject(_ input: GetObjectInput, into descriptor: Int32, at offset: Int64,
                          progress: TransferMeter?) async throws(FerryError) -> ObjectAttributes {
        var headers = input.headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        if let range = input.range { headers.append(("range", "bytes=\(range.lowerBound)-\(range.upperBound)")) }
        if let eTag = input.ifMatch { headers.append(("if-match", eTag)) }
        if input.checksumMode { headers.append(("x-amz-checksum-mode", "ENABLED")) }
        let observer = input.observer.map { seen in
            ResponseObserver(head: { _, headers in seen.attributes(Self.getAttributes(headers)) }, body: seen.body)
        }
        let response = try await send("GetObject", method: "GET", bucket: input.bucket, key: input.key, headers: headers,
                                      sink: .file(descriptor: descriptor, offset: offset),
                                      sinkLimit: input.maxBytes ?? input.range.map(Self.byteCount), progress: progress, observer: observer)
        if let range = input.range, let problem = ServedRange.problem(asked: range, status: response.status,
                                                                      contentRange: response.header("content-range"),
                                                                      bodyLength: response.bodyLength) {
            throw FerryError(.storageError, "GetObject of \(input.bucket)/\(input.key) answered with other bytes than asked for: "
                + "\(problem); they are not used")
        }
        var attributes = Self.getAttributes(response.headers)
        attributes.bytesReceived = response.bodyLength
        return attributes
    }

    /// The bytes a range names; never traps (a range is public input to this client).
    static func byteCount(_ range: ClosedRange<Int64>) -> Int64 {
        let (span, overflow) = range.upperBound.subtractingReportingOverflow(range.lowerBound)
        return overflow || span == .max ? .max : span + 1
    }

    /// A GET's attributes from its headers: the whole object's size, also for a
    /// range, whose answer names it after the slash ("bytes 0-99/12345").
    static func getAttributes(_ headers: [String: String]) -> ObjectAttributes {
        var attributes = attributes(headers)
        if let total = headers["content-range"]?.split(separator: "/").last.flatMap({ Int64($0) }), total >= 0 {
            attributes.size = total
        }
        return attributes
    }

    public func headObject(bucket: String, key: String, headers: [String: String]) async throws(FerryError) -> ObjectAttributes? {
        do {
            return Self.attributes(try await send("HeadObject", method: "HEAD", bucket: bucket, key: key,
                                                  headers: Self.customerKeyHeaders(headers)))
        } catch where error.code == .noSuchKey {
            return nil
        }
    }

    public func wholeObjectChecksum(_ location: ObjectLocation, eTag: String, headers: [String: String]) async throws(FerryError) -> WholeObjectChecksum? {
        let answer: [String: String]
        do {
            answer = try await send("HeadObject", method: "HEAD", bucket: location.bucket, key: location.key,
                                    headers: [("if-match", eTag), ("x-amz-checksum-mode", "ENABLED")] + Self.customerKeyHeaders(headers))
                .headers
        } catch where error.code == .noSuchKey {
            throw FerryError(.preconditionFailed, "\(location) was removed while it was downloaded")
        }
        guard answer["x-amz-checksum-type"].map({ $0.uppercased() == "FULL_OBJECT" }) ?? true else { return nil }
        return Self.attributes(answer).wholeObjectChecksum
    }

    public func copyObject(_ input: CopyObjectInput) async throws(FerryError) -> ObjectWriteResult {
        var headers = [("x-amz-copy-source", try Self.copySourceHeader(input.source)), ("x-amz-metadata-directive", "REPLACE")]
        headers += try Self.objectHeaders(input.destination)
        if input.destination.headers.keys.contains(where: { $0.lowercased() == "x-amz-tagging" }) {
            headers.append(("x-amz-tagging-directive", "REPLACE"))
        }
        headers += Self.copySourceKeyHeaders(input.sourceHeaders)
        let response = try await send("CopyObject", method: "PUT", bucket: input.destination.bucket, key: input.destination.key,
                                      headers: headers, body: .bytes([]))
        var result = writeResult(response)
        result.eTag = try Self.resultETag(response, operation: "CopyObject") ?? result.eTag
        return result
    }

    /// The object's own SSE-C key headers, sorted (they are signed).
    static func customerKeyHeaders(_ headers: [String: String]) -> [(String, String)] {
        headers.filter { HeaderPolicy.isCustomerKeyHeader($0.key) }.sorted { $0.key < $1.key }.map { ($0.key.lowercased(), $0.value) }
    }

    /// The source's SSE-C key headers of a copy, sorted (they are signed).
    static func copySourceKeyHeaders(_ headers: [String: String]) -> [(String, String)] {
        headers.filter { HeaderPolicy.isCopySourceKeyHeader($0.key) }.sorted { $0.key < $1.key }.map { ($0.key.lowercased(), $0.value) }
    }

    public func deleteObject(bucket: String, key: String) async throws(FerryError) -> ObjectWriteResult {
        writeResult(try await send("DeleteObject", method: "DELETE", bucket: bucket, key: key))
    }

    /// Creates a bucket (used by tests and `ferry dev`); an existing bucket of ours is fine.
    public func createBucket(_ bucket: String) async throws(FerryError) {
        do {
            _ = try await send("CreateBucket", method: "PUT", bucket: bucket, key: nil, body: .bytes([]))
        } catch where error.message.contains("BucketAlreadyOwnedByYou") {
            return
        }
    }

    /// An object as ListObjectsV2 names it.
    public struct ListedObject: Sendable, Hashable {
        public var key: String
        public var size: Int64
    }

    /// One page. A page the server says is truncated but that names no token to
    /// continue from is an error, not the end of the listing.
    public func listObjects(bucket: String, prefix: String, continuation: String?, maxKeys: Int) async throws(FerryError) -> ObjectListing {
        // encoding-type=url: keys with any character survive the XML (as botocore asks for them).
        var query: [(String, String)] = [("encoding-type", "url"), ("list-type", "2"), ("max-keys", String(min(max(maxKeys, 1), 1000))),
                                         ("prefix", prefix)]
        if let continuation { query.append(("continuation-token", continuation)) }
        let response = try await send("ListObjectsV2", method: "GET", bucket: bucket, key: nil, query: query.sorted { $0.0 < $1.0 })
        let document = try S3Document.expect(response, root: "ListBucketResult", record: "Contents",
                                             wanted: ["IsTruncated", "NextContinuationToken"], operation: "ListObjectsV2 of \(bucket)/\(prefix)")
        var items: [ObjectListing.Item] = []
        for record in document.records {
            // Form encoding: AWS writes a space as '+' (botocore decodes with unquote_plus), others as %20.
            guard let encoded = record["Key"] else { continue }
            let key = FormURLEncoding.decode(encoded)
            let eTag = record["ETag"].map { $0.count >= 2 && $0.hasPrefix("\"") && $0.hasSuffix("\"") ? String($0.dropFirst().dropLast()) : $0 }
            items.append(ObjectListing.Item(key: key, size: Int64(record["Size"] ?? "") ?? 0, eTag: eTag,
                                            lastModified: record["LastModified"].flatMap(Timestamp.parseInternetDateTime)))
        }
        let fields = document.fields
        guard fields["IsTruncated"] == "true" else { return ObjectListing(items: items, next: nil) }
        guard let next = fields["NextContinuationToken"], !next.isEmpty else {
            throw FerryError(.storageError, "ListObjectsV2 of \(bucket)/\(prefix): the server said the page was truncated but named no continuation token")
        }
        return ObjectListing(items: items, next: next)
    }

    // MARK: Presigning

    /// A URL that performs `method` on the object without credentials until it expires.
    /// `headers` (e.g. content-type for PUT) are signed and must be sent as given.
    /// With temporary credentials the URL stops working when they expire, whatever `expires` says.
    public func presignedURL(method: String, location: ObjectLocation, expires: Int, headers: [(String, String)] = [],
                             at date: Date? = nil) async throws(FerryError) -> String {
        try Self.checkAddress(bucket: location.bucket, key: location.key)
        for (name, value) in headers {
            if let problem = HeaderValueRule.violation(of: value, field: name) { throw problem }
        }
        let endpoint = configuration.endpoint
        let host = endpoint.hostHeader(bucket: location.bucket)
        let path = endpoint.path(bucket: location.bucket, key: location.key)
        let request = SigV4Signer.Request(method: method, host: host, path: path, headers: headers,
                                          payloadHash: SigV4Signer.unsignedPayload)
        let query = try await signer().presignedQuery(for: request, at: date ?? clock.now(), expires: expires)
        return Self.url(endpoint: endpoint, host: host, path: path, query: query)
    }

    /// Sends ListBuckets: any HTTP answer (even AccessDenied) means the endpoint
    /// is reachable; only transport failures, and credentials that cannot be had, throw.
    /// No answer within `probeTimeLimitSeconds` counts as none: a probe follows
    /// a request that got no answer, and a silent store should be known as down
    /// without waiting out another low-speed cut-off (30 s).
    public static let probeTimeLimitSeconds = 10

    public func probe() async throws(FerryError) {
        do {
            _ = try await send("Probe", method: "GET", bucket: nil, key: nil, timeLimitSeconds: Self.probeTimeLimitSeconds)
        } catch where !error.isNoAnswer {
            return
        }
    }

    // MARK: Requests

    /// Signs and sends one request; a non-2xx answer becomes a `FerryError`.
    /// A refusal for a signing time too far from the store's is signed again
    /// once, with the store's time (`SigningClock`).
    func send(_ operation: String, method: String, bucket: String?, key: String?,
              query: [(String, String)] = [], headers: [(String, String)] = [],
              body: HTTPRequest.Body = .none, payloadHash: String? = nil,
              sink: HTTPRequest.ResponseSink = .memory, sinkLimit: Int64? = nil, progress: TransferMeter? = nil,
              observer: ResponseObserver? = nil, timeLimitSeconds: Int? = nil) async throws(FerryError) -> HTTPResponse {
        try Self.checkAddress(bucket: bucket, key: key)
        let endpoint = configuration.endpoint
        let host = endpoint.hostHeader(bucket: bucket)
        let path = endpoint.path(bucket: bucket, key: key)
        let hash = payloadHash ?? Self.payloadHash(body)
        let unsigned = SigV4Signer.Request(method: method, host: host, path: path, query: query,
                                           headers: headers, payloadHash: hash)
        let url = Self.url(endpoint: endpoint, host: host, path: path, query: query)
        let started = ContinuousClock.now
        defer {
            Timer(label: "ferry_s3_request_duration_seconds", dimensions: [("operation", operation)])
                .record(duration: ContinuousClock.now - started)
        }
        var mayCorrectClock = true
        while true {
            let signedAt = clock.now()
            let signed = try await signer().signedHeaders(for: unsigned, at: signedAt)
            let response: HTTPResponse
            do {
                var request = HTTPRequest(method: method, url: url, headers: signed, body: body, response: sink, progress: progress)
                request.observer = observer
                request.maxBodyToFile = sinkLimit
                request.timeLimitSeconds = timeLimitSeconds
                response = try await transport.execute(request)
            } catch {
                Counter(label: "ferry_s3_errors_total", dimensions: [("operation", operation), ("code", error.code.rawValue)]).increment()
                throw error
            }
            if (200..<300).contains(response.status) { return response }
            // A HEAD's refusal has no body to name the cause: its `Date` alone decides.
            let fields = S3ErrorResponse.fields(response.body)
            let named = S3ErrorResponse.isClockSkew(fields)
            if mayCorrectClock, response.status == 403, named || method == "HEAD",
               let serverDate = response.date,
               clock.correct(signedAt: signedAt, serverDate: serverDate, named: named,
                             refusal: named ? "RequestTimeTooSkewed" : "a bare 403 to a HEAD, dated past S3's 15 minutes from the request") {
                mayCorrectClock = false
                continue
            }
            let error = S3ErrorResponse.error(status: response.status, fields: fields, operation: operation,
                                              requestId: response.header("x-amz-request-id"))
            Counter(label: "ferry_s3_errors_total", dimensions: [("operation", operation), ("code", error.code.rawValue)]).increment()
            throw error
        }
    }

    static func url(endpoint: S3Endpoint, host: String, path: String, query: [(String, String)]) -> String {
        var url = "\(endpoint.scheme)://\(host)\(SigV4Signer.uriEncode(path, keepSlash: true))"
        if !query.isEmpty {
            url += "?" + query.map { $0.1.isEmpty && $0.0 == "uploads" ? "uploads="
                                     : "\(SigV4Signer.uriEncode($0.0))=\(SigV4Signer.uriEncode($0.1))" }
                .joined(separator: "&")
        }
        return url
    }

    /// Small in-memory bodies (XML) are hashed; others must say how they are covered.
    private static func payloadHash(_ body: HTTPRequest.Body) -> String {
        switch body {
        case .none: return SigV4Signer.emptyPayloadHash
        case .bytes(let b): return Digest.sha256(b).hexString
        case .file: return SigV4Signer.unsignedPayload
        }
    }

    static func objectHeaders(_ input: PutObjectInput) throws(FerryError) -> [(String, String)] {
        try input.headerFields()
    }

    /// `x-amz-copy-source`: the source bucket and key, which pass the same rules
    /// as any object this client addresses, percent-encoded as S3 expects.
    static func copySourceHeader(_ source: ObjectLocation) throws(FerryError) -> String {
        try checkAddress(bucket: source.bucket, key: source.key)
        return "/\(source.bucket)/\(SigV4Signer.uriEncode(source.key, keepSlash: true))"
    }

    /// Every bucket and key this client puts on the wire: a valid bucket name
    /// and a key that passes `ObjectKeyRule`, so the request path is exactly
    /// the object named (no dot segment for a client or server to remove).
    static func checkAddress(bucket: String?, key: String?) throws(FerryError) {
        try ObjectLocation.checkAddress(bucket: bucket, key: key)
    }

    func writeResult(_ response: HTTPResponse) -> ObjectWriteResult {
        ObjectWriteResult(eTag: response.header("etag"), versionId: response.header("x-amz-version-id"),
                          requestId: response.header("x-amz-request-id") ?? "",
                          hostId: response.header("x-amz-id-2") ?? "")
    }

    /// The ETag in a CopyObject / CompleteMultipartUpload result body. These can
    /// fail after answering 200: the error is then in the body (after the white
    /// space S3 sends while it works, which the parser takes; tested).
    static func resultETag(_ response: HTTPResponse, operation: String) throws(FerryError) -> String? {
        let fields = XMLFields.parse(response.body, wanted: ["ETag", "Code"])
        if fields["Code"] != nil {
            throw S3ErrorResponse.error(status: 500, body: response.body, operation: operation,
                                        requestId: response.header("x-amz-request-id"))
        }
        return fields["ETag"].map(quotedETag)
    }

    /// ETags in XML bodies come quoted from some servers and bare from others;
    /// Ferry always uses the quoted form of the HTTP header.
    static func quotedETag(_ value: String) -> String {
        let bare = value.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        return "\"\(bare)\""
    }

    static func attributes(_ response: HTTPResponse) -> ObjectAttributes { attributes(response.headers) }

    /// From response headers (names lowercased).
    static func attributes(_ headers: [String: String]) -> ObjectAttributes {
        var metadata: [String: String] = [:]
        for (name, value) in headers where name.hasPrefix("x-amz-meta-") {
            metadata[String(name.dropFirst("x-amz-meta-".count))] = value
        }
        let lastModified = headers["last-modified"].flatMap(HTTPDate.parse)
        var attributes = ObjectAttributes(size: Int64(headers["content-length"] ?? "").map { max(0, $0) } ?? 0,
                                          eTag: headers["etag"], contentType: headers["content-type"],
                                          metadata: metadata, lastModified: lastModified,
                                          versionId: headers["x-amz-version-id"])
        for algorithm in ChecksumAlgorithm.allCases {
            if let value = headers[algorithm.headerName] { attributes.checksums[algorithm] = value }
        }
        return attributes
    }
}

/// MD5 (for Content-MD5) and an optional additional checksum of a body, in one pass.
struct BodyDigests: Sendable {
    var md5: [UInt8]
    var checksum: String?

    static func compute(_ body: ObjectBody, checksum algorithm: ChecksumAlgorithm?) throws(FerryError) -> BodyDigests {
        let md5 = Digest.Hasher.md5()
        var checksum = algorithm?.makeHasher()
        try body.read { chunk in
            md5.update(chunk)
            checksum?.update(chunk)
        }
        return BodyDigests(md5: md5.finish(), checksum: checksum?.finish())
    }
}
