import FerryTestSupport
import Foundation
import Testing

/// `ferry cp --recursive` from a prefix lists a page at a time while the
/// copies run; a listing that breaks off is a failure with its reason, after
/// the objects already listed are copied, never a silent short copy.
@Suite struct RecursiveCopyTests {
    @Test func aListingThatBreaksOffFailsTheCopyAfterTheObjectsListed() async throws {
        // Page one names two objects and a next page; the next page is refused.
        let server = try HTTPAnswerer { request in
            let line = request.prefix { $0 != "\r\n" }
            if line.contains("list-type=2") {
                if line.contains("continuation-token=t1") {
                    return ("HTTP/1.1 403 Forbidden", .fixed(Array("<Error><Code>AccessDenied</Code><Message>page two is not yours</Message></Error>".utf8)))
                }
                return ("HTTP/1.1 200 OK", .fixed(Array(("<?xml version=\"1.0\"?><ListBucketResult><IsTruncated>true</IsTruncated>"
                    + "<NextContinuationToken>t1</NextContinuationToken>"
                    + "<Contents><Key>p/a.txt</Key><Size>5</Size></Contents><Contents><Key>p/sub/b.txt</Key><Size>5</Size></Contents>"
                    + "</ListBucketResult>").utf8)))
            }
            // Every object holds "hello"; its ETag is that MD5, which the download checks.
            let head = request.lowercased().contains("\r\nrange: ")
                ? "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-4/5" : "HTTP/1.1 200 OK"
            return (head + "\r\nETag: \"5d41402abc4b2a76b9719d911017c592\"", .fixed(Array("hello".utf8)))
        }
        let out = try TestPaths.temporaryDirectory("cp-listing")
        defer { try? FileManager.default.removeItem(at: out) }
        let result = try await runCommand(TestPaths.ferryBinary,
                                          ["cp", "--recursive", "s3://bkt/p/", out.path, "--s3-endpoint", "http://127.0.0.1:\(server.port)"],
                                          environment: ["AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
                                                        "AWS_REGION": "us-east-1"])
        #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.hasPrefix("2 objects") && result.stdout.contains("1 failed"), "\(result.stdout)")
        #expect(result.stderr.contains("failed: listing s3://bkt/p/ broke off after 2 objects"), "\(result.stderr)")
        #expect(result.stderr.contains("AccessDenied") && result.stderr.contains("page two is not yours"), "\(result.stderr)")
        for name in ["a.txt", "sub/b.txt"] {
            #expect((try? String(contentsOf: out.appendingPathComponent(name), encoding: .utf8)) == "hello", "\(name)")
        }
    }
}
