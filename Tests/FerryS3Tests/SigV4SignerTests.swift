import FerryCore
import FerryS3
import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// Ferry's signer against botocore's, stage by stage, for fixed inputs and time.
@Suite struct SigV4SignerTests {
    struct Case: Encodable {
        var method: String
        var url: String
        var headers: [String: String]
        var body: String
        var region: String
        var amzDate: String
        var accessKeyId: String
        var secretAccessKey: String
        var sessionToken: String?
        var presignExpires: Int?
    }

    struct HeaderResult: Decodable { var canonicalRequest: String; var stringToSign: String; var signature: String }
    struct PresignResult: Decodable { var url: String; var query: [String: String] }

    static let date = Date(timeIntervalSince1970: 1_369_353_600)  // 2013-05-24T00:00:00Z
    static let credentials = AWSCredentials(accessKeyId: "AKIAIOSFODNN7EXAMPLE",
                                            secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")

    /// (method, host, raw path, raw query, headers, body, token)
    static let inputs: [(String, String, String, [(String, String)], [(String, String)], String, String?)] = [
        ("GET", "127.0.0.1:9000", "/bucket/key.txt", [], [], "", nil),
        ("PUT", "127.0.0.1:9000", "/photos/a b+c/ü&=$@!'().jpg", [],
         [("content-type", "image/jpeg"), ("x-amz-meta-camera", "  x100   v  "), ("content-md5", "XUFAKrxLKna5cZ2REBfFkg==")],
         "hello", nil),
        ("GET", "examplebucket.s3.amazonaws.com", "/", [("list-type", "2"), ("prefix", "a b/ü"), ("max-keys", "10")], [], "",
         "FQoGZXIvYXdzEJr//////////wEaDOtoken+/="),
        ("DELETE", "localhost:7480", "/b/~tilde_-.key", [("versionId", "3/L4kqtJl40Nr8X8gdRQBpUMLUo")], [], "", nil),
    ]

    func encodedURL(host: String, path: String, query: [(String, String)]) -> String {
        var url = "http://\(host)\(SigV4Signer.uriEncode(path, keepSlash: true))"
        if !query.isEmpty {
            url += "?" + query.map { "\(SigV4Signer.uriEncode($0.0))=\(SigV4Signer.uriEncode($0.1))" }.joined(separator: "&")
        }
        return url
    }

    func botocore<R: Decodable>(_ cases: [Case]) async throws -> [R] {
        let script = TestPaths.python.appendingPathComponent("botocore_sigv4.py").path
        let output = try await runChecked("python3", [script], input: try JSONEncoder().encode(cases))
        return try JSONDecoder().decode([R].self, from: Data(output.utf8))
    }

    typealias Input = (method: String, host: String, path: String, query: [(String, String)], headers: [(String, String)],
                       body: String, token: String?)

    @Test func headerSignaturesMatchBotocore() async throws {
        try await expectSameAsBotocore(Self.inputs.map { Input($0.0, $0.1, $0.2, $0.3, $0.4, $0.5, $0.6) })
    }

    /// The same comparison for 300 seeded requests: paths and query strings of
    /// any Unicode, header values with runs of spaces and tabs at either end and
    /// inside, repeated query names, empty values, session tokens.
    @Test func generatedRequestsSignAsBotocoreDoes() async throws {
        var rng = SeededGenerator(seed: 0x5164)
        let pieces = ["a", "Z", "0", " ", "  ", "\t", "-", "_", ".", "~", "/", "+", "=", "&", "%", "?", "#", ":", "@", "!", "*",
                      "'", "(", ")", ",", ";", "$", "ü", "日本", "😀", "\"", "<", ">", "|", "^", "`", "{", "}"]
        let headerPieces = ["a", "B", "9", " ", "   ", "\t", " \t ", "-", "=", "/", "+", ",", ";", ":", "\"", "(", ")", "*", "~"]
        func text(_ alphabet: [String], _ lengths: ClosedRange<Int>) -> String {
            (0..<Int.random(in: lengths, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }.joined()
        }
        var inputs: [Input] = []
        for _ in 0..<300 {
            let method = ["GET", "PUT", "DELETE", "HEAD", "POST"].randomElement(using: &rng)!
            let path = "/bucket/" + text(pieces, 0...12)
            let names = ["prefix", "uploadId", "partNumber", "list-type", "x-id", "a b", "ü", "versionId"]
            let query = (0..<Int.random(in: 0...3, using: &rng)).map { _ in (names.randomElement(using: &rng)!, text(pieces, 0...6)) }
            var headers: [(String, String)] = []
            for n in 0..<Int.random(in: 0...4, using: &rng) {
                // A value of nothing but spaces signs as empty on both sides, but
                // HTTP would drop it: keep one visible character.
                headers.append(("x-amz-meta-h\(n)", text(headerPieces, 0...10) + "v" + text(headerPieces, 0...10)))
            }
            let token: String? = Bool.random(using: &rng) ? "FQoGZXIvYXdzE" + text(["a", "/", "+", "="], 1...8) : nil
            inputs.append(Input(method, "127.0.0.1:9000", path, query, headers, text(["x", "y"], 0...20), token))
        }
        try await expectSameAsBotocore(inputs)
    }

    /// Signs each input with Ferry's signer and with botocore's, and compares the
    /// canonical request, the string to sign and the signature.
    func expectSameAsBotocore(_ inputs: [Input]) async throws {
        var cases: [Case] = []
        var ours: [(canonical: String, stringToSign: String, signature: String)] = []
        for (method, host, path, query, headers, body, token) in inputs {
            var credentials = Self.credentials
            credentials.sessionToken = token
            let signer = SigV4Signer(credentials: credentials, region: "us-east-1")
            let payloadHash = Digest.sha256(Array(body.utf8)).hexString
            let request = SigV4Signer.Request(method: method, host: host, path: path, query: query,
                                              headers: headers, payloadHash: payloadHash)
            let signed = signer.signedHeaders(for: request, at: Self.date)
            var full = request
            full.headers = signed.filter { $0.0 != "authorization" }
            let canonical = signer.canonicalRequest(full).text
            let sts = signer.stringToSign(canonicalRequest: canonical, amzDate: "20130524T000000Z",
                                          scope: signer.credentialScope(Self.date))
            let authorization = try #require(signed.first { $0.0 == "authorization" }?.1)
            let signature = String(try #require(authorization.split(separator: "=").last))
            ours.append((canonical, sts, signature))
            cases.append(Case(method: method, url: encodedURL(host: host, path: path, query: query),
                              headers: Dictionary(headers, uniquingKeysWith: { a, _ in a }), body: body, region: "us-east-1",
                              amzDate: "20130524T000000Z", accessKeyId: credentials.accessKeyId,
                              secretAccessKey: credentials.secretAccessKey, sessionToken: token))
        }
        let theirs: [HeaderResult] = try await botocore(cases)
        #expect(theirs.count == ours.count)
        for (index, (mine, reference)) in zip(ours, theirs).enumerated() {
            #expect(mine.canonical == reference.canonicalRequest, "case \(index): \(inputs[index])")
            #expect(mine.stringToSign == reference.stringToSign, "case \(index)")
            #expect(mine.signature == reference.signature, "case \(index)")
        }
    }

    @Test func presignedQueryMatchesBotocore() async throws {
        let signer = SigV4Signer(credentials: Self.credentials, region: "eu-west-1")
        let request = SigV4Signer.Request(method: "GET", host: "127.0.0.1:9000", path: "/bucket/dir/a b.txt",
                                          payloadHash: SigV4Signer.unsignedPayload)
        let query = signer.presignedQuery(for: request, at: Self.date, expires: 3600)
        let theirs: [PresignResult] = try await botocore([Case(
            method: "GET", url: encodedURL(host: "127.0.0.1:9000", path: "/bucket/dir/a b.txt", query: []), headers: [:],
            body: "", region: "eu-west-1", amzDate: "20130524T000000Z", accessKeyId: Self.credentials.accessKeyId,
            secretAccessKey: Self.credentials.secretAccessKey, presignExpires: 3600)])
        let reference = try #require(theirs.first)
        #expect(Dictionary(uniqueKeysWithValues: query) == reference.query)
    }

    /// AWS's published example (S3 API reference, "Example: GET Object").
    @Test func awsDocumentedGetObjectExample() {
        let signer = SigV4Signer(credentials: Self.credentials, region: "us-east-1")
        let request = SigV4Signer.Request(method: "GET", host: "examplebucket.s3.amazonaws.com", path: "/test.txt",
                                          headers: [("range", "bytes=0-9")], payloadHash: SigV4Signer.emptyPayloadHash)
        let authorization = signer.signedHeaders(for: request, at: Self.date).first { $0.0 == "authorization" }?.1
        #expect(authorization == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    }
}

@Suite struct EndpointTests {
    @Test func addressingStyles() throws {
        let local = try S3Endpoint(url: "http://127.0.0.1:7480")
        #expect(local.hostHeader(bucket: "b") == "127.0.0.1:7480")
        #expect(local.path(bucket: "b", key: "a/b c") == "/b/a/b c")
        #expect(local.accelerated == nil)
        let aws = try S3Endpoint.aws(region: "eu-west-1")
        #expect(aws.hostHeader(bucket: "photos") == "photos.s3.eu-west-1.amazonaws.com")
        #expect(aws.path(bucket: "photos", key: "k") == "/k")
        let fast = try #require(aws.accelerated)
        #expect(fast.hostHeader(bucket: "photos") == "photos.s3-accelerate.amazonaws.com")
        #expect(fast.scheme == "https")
        #expect(throws: ConfigurationError.self) { try S3Endpoint(url: "ftp://example.com") }
    }

    @Test func sharedCredentialsFileProfiles() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("creds-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try """
            [default]
            aws_access_key_id = AKIADEFAULT
            aws_secret_access_key = secret-default

            # a comment
            [prod]
            aws_access_key_id=AKIAPROD
            aws_secret_access_key=secret-prod
            aws_session_token=token-prod
            """.write(to: file, atomically: true, encoding: .utf8)
        let env = ["AWS_SHARED_CREDENTIALS_FILE": file.path]
        #expect(AWSCredentials.fromSharedFile(env)?.accessKeyId == "AKIADEFAULT")
        let prod = AWSCredentials.fromSharedFile(env.merging(["AWS_PROFILE": "prod"]) { $1 })
        #expect(prod?.sessionToken == "token-prod")
        #expect(AWSCredentials.fromSharedFile(profile: "missing", env) == nil)
        #expect(!(prod?.description.contains("secret-prod") ?? true))
    }
}
