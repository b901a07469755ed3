import FerryCore
import Foundation
import Logging

/// An S3 client over libcurl. Every request is signed when it is sent, so a
/// long transfer never outlives a signature.
public final class S3Client: ObjectStore {
    public struct Configuration: Sendable {
        public var endpoint: S3Endpoint
        public var region: String
        public var credentials: AWSCredentials
        public var timeouts: CurlTransport.Timeouts
        /// PEM file of CAs to trust for HTTPS (default: the system's).
        public var caBundle: String?

        public init(endpoint: S3Endpoint, region: String, credentials: AWSCredentials,
                    timeouts: CurlTransport.Timeouts = .init(), caBundle: String? = nil) {
            self.endpoint = endpoint; self.region = region; self.credentials = credentials
            self.timeouts = timeouts; self.caBundle = caBundle
        }
    }

    public let configuration: Configuration
    private let transport: CurlTransport
    private let signer: SigV4Signer

    public init(_ configuration: Configuration) {
        self.configuration = configuration
        self.transport = CurlTransport(timeouts: configuration.timeouts, caBundle: configuration.caBundle)
        self.signer = SigV4Signer(credentials: configuration.credentials, region: configuration.region)
    }

    // MARK: ObjectStore

    public func putObject(_ input: PutObjectInput, body: ObjectBody) async throws(FerryError) -> ObjectWriteResult {
        let digests = try BodyDigests.compute(body)
        var headers: [(String, String)] = [("content-md5", Data(digests.md5).base64EncodedString())]
        if let type = input.contentType { headers.append(("content-type", type)) }
        for (name, value) in input.metadata.sorted(by: { $0.key < $1.key }) {
            headers.append(("x-amz-meta-\(name.lowercased())", value))
        }
        let httpBody: HTTPRequest.Body
        switch body {
        case .bytes(let b): httpBody = .bytes(b)
        case .file(let fd, let length): httpBody = .file(descriptor: fd, offset: 0, length: length)
        }
        let response = try await send("PutObject", method: "PUT", bucket: input.bucket, key: input.key,
                                      headers: headers, body: httpBody, payloadHash: digests.sha256.hexString)
        return writeResult(response)
    }

    public func getObject(bucket: String, key: String, into descriptor: Int32) async throws(FerryError) -> ObjectAttributes {
        let response = try await send("GetObject", method: "GET", bucket: bucket, key: key,
                                      sink: .file(descriptor: descriptor, offset: 0))
        var attributes = Self.attributes(response)
        attributes.size = response.bodyLength
        return attributes
    }

    public func headObject(bucket: String, key: String) async throws(FerryError) -> ObjectAttributes? {
        do {
            return Self.attributes(try await send("HeadObject", method: "HEAD", bucket: bucket, key: key))
        } catch where error.code == .noSuchKey {
            return nil
        }
    }

    public func copyObject(from source: ObjectLocation, to destination: ObjectLocation) async throws(FerryError) -> ObjectWriteResult {
        let copySource = "/\(source.bucket)/\(SigV4Signer.uriEncode(source.key, keepSlash: true))"
        let response = try await send("CopyObject", method: "PUT", bucket: destination.bucket, key: destination.key,
                                      headers: [("x-amz-copy-source", copySource)], body: .bytes([]))
        // CopyObject can fail after answering 200: the error is then in the body.
        let fields = XMLFields.parse(response.body, wanted: ["ETag", "Code", "Message"])
        if let code = fields["Code"] {
            throw S3ErrorResponse.error(status: 200, body: response.body, operation: "CopyObject \(code)",
                                        requestId: response.header("x-amz-request-id"))
        }
        var result = writeResult(response)
        result.eTag = fields["ETag"].map(Self.quotedETag) ?? result.eTag
        return result
    }

    public func deleteObject(bucket: String, key: String) async throws(FerryError) -> ObjectWriteResult {
        writeResult(try await send("DeleteObject", method: "DELETE", bucket: bucket, key: key))
    }

    /// Creates a bucket (used by tests and `ferry dev`); an existing bucket of ours is fine.
    public func createBucket(_ bucket: String) async throws(FerryError) {
        do {
            _ = try await send("CreateBucket", method: "PUT", bucket: bucket, key: nil, body: .bytes([]),
                               payloadHash: SigV4Signer.emptyPayloadHash)
        } catch where error.message.contains("BucketAlreadyOwnedByYou") {
            return
        }
    }

    // MARK: Requests

    /// Signs and sends one request; a non-2xx answer becomes a `FerryError`.
    func send(_ operation: String, method: String, bucket: String?, key: String?,
              query: [(String, String)] = [], headers: [(String, String)] = [],
              body: HTTPRequest.Body = .none, payloadHash: String = SigV4Signer.emptyPayloadHash,
              sink: HTTPRequest.ResponseSink = .memory) async throws(FerryError) -> HTTPResponse {
        let endpoint = configuration.endpoint
        let host = endpoint.hostHeader(bucket: bucket)
        let path = endpoint.path(bucket: bucket, key: key)
        let unsigned = SigV4Signer.Request(method: method, host: host, path: path, query: query,
                                           headers: headers, payloadHash: payloadHash)
        let signed = signer.signedHeaders(for: unsigned, at: Date())
        var url = "\(endpoint.scheme)://\(host)\(SigV4Signer.uriEncode(path, keepSlash: true))"
        if !query.isEmpty {
            url += "?" + query.map { "\(SigV4Signer.uriEncode($0.0))=\(SigV4Signer.uriEncode($0.1))" }.joined(separator: "&")
        }
        let response = try await transport.execute(HTTPRequest(method: method, url: url, headers: signed,
                                                                body: body, response: sink))
        guard (200..<300).contains(response.status) else {
            throw S3ErrorResponse.error(status: response.status, body: response.body, operation: operation,
                                        requestId: response.header("x-amz-request-id"))
        }
        return response
    }

    /// ETags in XML bodies come quoted from some servers and bare from others;
    /// Ferry always uses the quoted form of the HTTP header.
    static func quotedETag(_ value: String) -> String {
        let bare = value.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        return "\"\(bare)\""
    }

    private func writeResult(_ response: HTTPResponse) -> ObjectWriteResult {
        ObjectWriteResult(eTag: response.header("etag"), versionId: response.header("x-amz-version-id"),
                          requestId: response.header("x-amz-request-id") ?? "",
                          hostId: response.header("x-amz-id-2") ?? "")
    }

    static func attributes(_ response: HTTPResponse) -> ObjectAttributes {
        var metadata: [String: String] = [:]
        for (name, value) in response.headers where name.hasPrefix("x-amz-meta-") {
            metadata[String(name.dropFirst("x-amz-meta-".count))] = value
        }
        let lastModified = response.header("last-modified").flatMap(HTTPDate.parse)
        return ObjectAttributes(size: Int64(response.header("content-length") ?? "") ?? 0,
                                eTag: response.header("etag"), contentType: response.header("content-type"),
                                metadata: metadata, lastModified: lastModified,
                                versionId: response.header("x-amz-version-id"))
    }
}

/// SHA-256 (for the signature) and MD5 (for Content-MD5) of a body, in one pass.
struct BodyDigests {
    var sha256: [UInt8]
    var md5: [UInt8]

    static func compute(_ body: ObjectBody) throws(FerryError) -> BodyDigests {
        var sha = Digest.Hasher.sha256()
        var md5 = Digest.Hasher.md5()
        switch body {
        case .bytes(let bytes):
            sha.update(bytes); md5.update(bytes)
        case .file(let fd, let length):
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var offset: Int64 = 0
            while offset < length {
                let want = Int(min(Int64(buffer.count), length - offset))
                let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, want, off_t(offset)) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    throw FerryError(.localIOError, n == 0 ? "file shrank while it was being read"
                                                           : "cannot read upload source: \(String(cString: strerror(errno)))")
                }
                buffer.withUnsafeBytes { raw in
                    let chunk = UnsafeRawBufferPointer(rebasing: raw[0..<n])
                    sha.update(chunk); md5.update(chunk)
                }
                offset += Int64(n)
            }
        }
        return BodyDigests(sha256: sha.finish(), md5: md5.finish())
    }
}

/// RFC 7231 dates (`Last-Modified`).
enum HTTPDate {
    static func parse(_ s: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: s)
    }
}
