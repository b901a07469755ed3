import FerryCore
@testable import FerryLocalStore
@testable import FerryS3
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// S3's answers are XML from the network: what they may make Ferry do is
/// bounded. No external entity is fetched (the file's contents never reach a
/// message), nested entities do not blow up, and the server's words in an
/// error are cut to a size that can travel on in statuses and logs.
@Suite struct HostileXMLTests {
    struct Unexpected: Error {}  // an error document taken for a listing

    func listingError(_ body: String, status: Int = 403) async throws -> (FerryError, Duration) {
        let server = try HTTPAnswerer(head: "HTTP/1.1 \(status) Whatever", body: body)
        let s3 = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: "http://127.0.0.1:\(server.port)"), region: "us-east-1",
                                credentials: AWSCredentials(accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret")))
        let started = ContinuousClock.now
        do {
            _ = try await s3.listObjects(bucket: "bkt", prefix: "")
        } catch {
            return (error, ContinuousClock.now - started)
        }
        throw Unexpected()
    }

    @Test func anExternalEntityIsNotFetched() async throws {
        let secret = try TestPaths.temporaryDirectory("xxe").appendingPathComponent("secret")
        try Data("TOP-SECRET-\(UInt64.random(in: 0...UInt64.max))".utf8).write(to: secret)
        let (error, _) = try await listingError("""
            <?xml version="1.0"?><!DOCTYPE Error [<!ENTITY x SYSTEM "file://\(secret.path)">]>\
            <Error><Code>AccessDenied</Code><Message>a&x;b</Message></Error>
            """)
        #expect(!error.message.contains("TOP-SECRET"), "\(error)")
        #expect(error.code == .accessDenied, "\(error)")
    }

    @Test func nestedEntitiesDoNotExplode() async throws {
        var doctype = "<!ENTITY e0 \"ha\">"
        for level in 1...12 { doctype += "<!ENTITY e\(level) \"" + String(repeating: "&e\(level - 1);", count: 10) + "\">" }
        let (error, elapsed) = try await listingError("<?xml version=\"1.0\"?><!DOCTYPE Error [\(doctype)]>"
            + "<Error><Code>SlowDown</Code><Message>&e12;</Message></Error>", status: 503)
        // 10^12 expansions were never made: the parser refuses or skips them, and the message stays small.
        #expect(error.message.utf8.count < 2_048, "\(error.message.utf8.count) bytes")
        #expect(elapsed < .seconds(20), "took \(elapsed)")
    }

    @Test func theServersWordsAreCut() async throws {
        let long = String(repeating: "é", count: 200_000)  // 800 kB in all: under the error body cap
        let (error, _) = try await listingError("<Error><Code>\(long)</Code><Message>\(long)</Message></Error>", status: 500)
        #expect(error.message.utf8.count < 2_048, "\(error.message.utf8.count) bytes")
        #expect(error.message.contains("more bytes)"), "\(error.message.prefix(300))")
        #expect(error.message.contains("HTTP 500"))  // still a server error, still retried
        #expect(TextClip.clipped("ab", toUTF8: 2) == "ab")
        #expect(TextClip.clipped("aéb", toUTF8: 2) == "a… (3 more bytes)")
        #expect(TextClip.clipped("éé", toUTF8: 3) == "é… (2 more bytes)")
        // A status carries at most 8 KiB of any message.
        let info = TransferStatus.ErrorInfo(FerryError(.storageError, String(repeating: "x", count: 100_000)))
        #expect(info.message.utf8.count < TransferStatus.ErrorInfo.maxMessageBytes + 64 && info.message.hasSuffix("more bytes)"))
    }

    /// An STS refusal's words are cut the same way: they end up in the worker's log.
    @Test func anSTSRefusalsWordsAreCut() async throws {
        let long = String(repeating: "é", count: 200_000)
        let server = try HTTPAnswerer(head: "HTTP/1.1 403 Forbidden", body: "<ErrorResponse><Error><Code>\(long)</Code>"
                                      + "<Message>\(long)</Message></Error></ErrorResponse>")
        let sts = SecurityTokenService(endpoint: "http://127.0.0.1:\(server.port)", region: "us-east-1", transport: CurlTransport())
        do {
            _ = try await sts.assumeRoleWithWebIdentity(roleArn: "arn:aws:iam::1:role/r", sessionName: "s", token: "t", durationSeconds: nil)
            Issue.record("a refusal was taken for credentials")
        } catch {
            #expect(error.code == .accessDenied, "\(error)")
            #expect(error.message.utf8.count < 2_048 && error.message.contains("more bytes)"), "\(error.message.utf8.count) bytes")
        }
    }

    /// Bytes that are not UTF-8 in a name made FoundationXML's parser trap (the
    /// whole process stopped, found by ListingDocumentTests' noise, seed
    /// 6641932641173323691): such a body is refused before it is parsed, as a
    /// listing page and as an error document alike.
    @Test func aBodyThatIsNotUTF8NeverReachesTheParser() {
        let body: [UInt8] = [0x3C, 0xF3, 0xA4, 0x8F, 0x55, 0x3E]
        #expect(S3Document.parse(body).problem == "it is not UTF-8 text")
        #expect(XMLFields.parse(body, wanted: ["Code"]).isEmpty)
        let error = S3ErrorResponse.error(status: 500, body: body, operation: "GetObject", requestId: nil)
        #expect(error.message.contains("HTTP 500"), "\(error)")
    }
}
