import FerryCore
@testable import FerryLocalStore
@testable import FerryS3
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// No request leaves with a header line that would split: whatever a header's
/// source (a credentials endpoint's token, configuration), a CR, LF or NUL in
/// a value, or those or a colon or space in a name, stops the request before
/// it is sent, naming the header and never its value.
@Suite struct HeaderInjectionTests {
    @Test func noHeaderThatWouldSplitIsSent() async throws {
        let server = try HTTPAnswerer(head: "HTTP/1.1 200 OK", bodyBytes: 2)
        let transport = CurlTransport()
        let seed = FuzzReplay.seed
        print("HeaderInjectionTests seed \(seed)")
        var random = SeededGenerator(seed: seed)
        let pieces = ["a", "Z", "-", "=", "é", "\r", "\n", "\r\n", "\0", ":", " ", "\t", "SECRET", "x-amz-security-token", "\u{2028}"]
        for _ in 0..<300 {
            let name = (0..<Int.random(in: 0...3, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined()
            let value = (0..<Int.random(in: 0...4, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined()
            let splits = name.isEmpty || name.utf8.contains { [0x0D, 0x0A, 0, UInt8(ascii: ":"), 0x20].contains($0) }
                || value.utf8.contains { [0x0D, 0x0A, 0].contains($0) }
            let request = HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/h", headers: [("x-ok", "1"), (name, value)])
            do {
                let response = try await transport.execute(request)
                #expect(!splits, "sent \(name.debugDescription): \(value.debugDescription)")
                #expect(response.status == 200)
            } catch {
                #expect(splits, "refused \(name.debugDescription): \(value.debugDescription): \(error)")
                #expect(error.code == .invalidRequest)
                if value.contains("SECRET") { #expect(!error.message.contains("SECRET") || name.contains("SECRET"), "\(error)") }
            }
        }
    }

    /// Credentials from an endpoint are such a source: a session token with a
    /// line break refuses the S3 request instead of adding a header of its own.
    @Test func aSessionTokenWithALineBreakIsNotSent() async throws {
        let server = try HTTPAnswerer(head: "HTTP/1.1 200 OK", bodyBytes: 0)
        let s3 = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: "http://127.0.0.1:\(server.port)"), region: "us-east-1",
                                credentials: AWSCredentials(accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret",
                                                            sessionToken: "tok\r\nx-amz-acl: public-read-write")))
        await #expect { _ = try await s3.headObject(bucket: "bkt", key: "k", headers: [:]) } throws: {
            "\($0)".contains("x-amz-security-token") && !"\($0)".contains("public-read-write")
        }
    }
}
