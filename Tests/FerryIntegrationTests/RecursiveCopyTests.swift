import FerryS3
import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// `ferry cp --recursive` from a prefix lists a page at a time while the
/// copies run; a listing that breaks off is a failure with its reason, after
/// the objects already listed are copied, never a silent short copy. A store
/// that gives no answer stops the copy at once; one object without an answer
/// from a store that answers is that object's failure.
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

    /// Every download announces itself to the MD5 lanes when it sends its GET
    /// (so the lanes wait for it) and gives the announcement back however it
    /// ends: checked, failed its MD5, refused, cut off before its headers, or
    /// with an ETag that is no MD5. None is left once the copy has ended: a
    /// leak would make the lanes wait out `finishWait` on every file after it.
    @Test func everyDownloadGivesBackItsAnnouncementToTheMD5Lanes() async throws {
        // Larger than one chunk of the lanes (256 KiB), so the copy's files go through a batch.
        let body = [UInt8](repeating: UInt8(ascii: "h"), count: 300 << 10)
        let hello = Digest.md5(body).map { String(format: "%02x", $0) }.joined()
        let names = (1...6).map { "ok-\($0)" } + ["bad-md5", "gone", "hang-up", "multipart"]
        let server = try HTTPAnswerer { request in
            let line = request.prefix { $0 != "\r\n" }
            if line.contains("list-type=2") {
                return ("HTTP/1.1 200 OK", .fixed(Array(("<?xml version=\"1.0\"?><ListBucketResult><IsTruncated>false</IsTruncated>"
                    + names.map { "<Contents><Key>p/\($0)</Key><Size>\(body.count)</Size></Contents>" }.joined() + "</ListBucketResult>").utf8)))
            }
            if line.contains("/p/gone ") {
                return ("HTTP/1.1 404 Not Found", .fixed(Array("<Error><Code>NoSuchKey</Code></Error>".utf8)))
            }
            if line.contains("/p/hang-up ") { return ("", .hangUp) }
            let eTag = line.contains("/p/bad-md5 ") ? String(hello.reversed()) : line.contains("/p/multipart ") ? "\(hello)-2" : hello
            let head = request.lowercased().contains("\r\nrange: ")
                ? "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-\(body.count - 1)/\(body.count)" : "HTTP/1.1 200 OK"
            return (head + "\r\nETag: \"\(eTag)\"", .fixed(body))
        }
        let out = try TestPaths.temporaryDirectory("cp-announce")
        defer { try? FileManager.default.removeItem(at: out) }
        let result = try await runCommand(TestPaths.ferryBinary,
                                          ["cp", "--recursive", "s3://bkt/p/", out.path, "--s3-endpoint", "http://127.0.0.1:\(server.port)",
                                           "--max-transfers", "4", "--log-level", "debug"],
                                          environment: Self.credentials)
        #expect(result.status == 1, "\(result.stdout) \(result.stderr.suffix(3000))")
        #expect(result.stdout.hasPrefix("7 objects") && result.stdout.contains("3 failed"), "\(result.stdout)")
        for name in names where name.hasPrefix("ok-") || name == "multipart" {
            #expect((try? Data(contentsOf: out.appendingPathComponent(name))) == Data(body), "\(name)")
        }
        #expect(result.stderr.contains("files per batch; 0 downloads still announced"), "\(result.stderr.suffix(3000))")
    }

    static let credentials = ["AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "us-east-1"]

    func files(_ count: Int, in name: String) throws -> URL {
        let source = try TestPaths.temporaryDirectory(name)
        for i in 0..<count { try Data("file \(i)\n".utf8).write(to: source.appendingPathComponent("f\(i).txt")) }
        return source
    }

    @Test func aStoreThatGivesNoAnswerStopsTheCopyAtOnce() async throws {
        let source = try files(300, in: "cp-dead-store")
        defer { try? FileManager.default.removeItem(at: source) }
        // Nothing listens there: every connection is refused.
        let result = try await runCommand(TestPaths.ferryBinary,
                                          ["cp", "--recursive", source.path, "s3://bkt/p/", "--s3-endpoint", "http://127.0.0.1:\(TestPaths.freePort())"],
                                          environment: Self.credentials)
        #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
        // Every file is accounted for as not copied, none as its own failure: the copies that
        // failed before the probe confirmed the outage are the outage's too.
        #expect(result.stdout.hasPrefix("0 objects") && !result.stdout.contains("failed"), "\(result.stdout)")
        #expect(result.stderr.contains("stopped: the store gives no answer (ConnectionError: GET http://127.0.0.1:")
                && result.stderr.contains("; 300 more not copied. Run the same command again once it answers."), "\(result.stderr.suffix(1500))")
        // No request is retried into the store once its probe got no answer either.
        let retried = result.stderr.split(separator: "\n").filter { $0.contains("retrying PutObject") }
        #expect(retried.isEmpty, "\(retried.count) retries: \(retried.prefix(3))")
    }

    /// A store that takes connections and never answers: each running copy
    /// waits out one low-speed cut-off (30 s, which curl ends after about 37 s),
    /// the probe its 10 s limit, and the copy stops, without a retry. It used to
    /// take four cut-offs for each running copy and a 30 s probe.
    @Test func aStoreThatTakesConnectionsAndNeverAnswersStopsTheCopyAfterOneCutOff() async throws {
        let source = try files(40, in: "cp-silent-store")
        defer { try? FileManager.default.removeItem(at: source) }
        let puts = SharedCounter(), probes = SharedCounter()
        let server = try HTTPAnswerer { request in
            if request.hasPrefix("PUT ") { puts.add() }
            if request.hasPrefix("GET / ") { probes.add() }  // ListBuckets, the breaker's probe
            return ("", .silence)
        }
        let started = ContinuousClock.now
        let result = try await runCommand(TestPaths.ferryBinary,
                                          ["cp", "--recursive", source.path, "s3://bkt/p/", "--s3-endpoint", "http://127.0.0.1:\(server.port)",
                                           "--max-transfers", "4"],
                                          environment: Self.credentials)
        print("a silent store stopped the copy after \(ContinuousClock.now - started), \(puts.value) PUTs and \(probes.value) probes sent")
        #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.hasPrefix("0 objects") && !result.stdout.contains("failed"), "\(result.stdout)")
        #expect(result.stderr.contains("stopped: the store gives no answer (ConnectionError: GET http://127.0.0.1:")
                && result.stderr.contains("; 40 more not copied."), "\(result.stderr.suffix(1500))")
        // One PUT for each copy that was running, none sent again.
        #expect(puts.value <= 4 && !result.stderr.contains("retrying"), "\(result.stderr.suffix(1500))")
        // The copies' requests were cut off together: they shared one probe.
        #expect(probes.value == 1, "\(probes.value) probes")
    }

    @Test func oneObjectWithoutAnAnswerFromAStoreThatAnswersIsThatObjectsFailure() async throws {
        let source = try files(40, in: "cp-one-hang-up")
        defer { try? FileManager.default.removeItem(at: source) }
        let server = try HTTPAnswerer { request in
            let line = request.prefix { $0 != "\r\n" }
            if line.contains("/p/f7.txt ") { return ("", .hangUp) }
            guard let name = line.split(separator: " ").dropFirst().first?.split(separator: "/").last,
                  let index = Int(name.dropFirst().prefix { $0 != "." }) else {
                return ("HTTP/1.1 200 OK", .fixed(Array("<ListAllMyBucketsResult/>".utf8)))  // the probe
            }
            let eTag = Digest.md5(Array("file \(index)\n".utf8)).map { String(format: "%02x", $0) }.joined()
            return ("HTTP/1.1 200 OK\r\nETag: \"\(eTag)\"", .fixed([]))
        }
        let result = try await runCommand(TestPaths.ferryBinary,
                                          ["cp", "--recursive", source.path, "s3://bkt/p/", "--s3-endpoint", "http://127.0.0.1:\(server.port)"],
                                          environment: Self.credentials)
        #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.hasPrefix("39 objects") && result.stdout.contains(", 1 failed"), "\(result.stdout)")
        #expect(result.stderr.contains("failed: p/f7.txt: ConnectionError") && !result.stderr.contains("stopped:"),
                "\(result.stderr.suffix(1500))")
    }
}
