import FerryCore
@testable import FerryLocalStore
@testable import FerryS3
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// A peer decides how much it sends; Ferry decides how much of it it keeps.
/// A body bound for memory (S3's XML, a webhook's answer, any error document)
/// past its cap ends the request with a reason, instead of growing the process
/// until a timeout or the kernel stops it.
@Suite struct ResponseBodyCapTests {
    func fetch(_ server: HTTPAnswerer, cap: Int? = nil) async -> (Result<HTTPResponse, FerryError>, Duration) {
        var request = HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/x?X-Amz-Signature=secret")
        if let cap { request.maxBodyInMemory = cap }
        let started = ContinuousClock.now
        do {
            let response = try await CurlTransport().execute(request)
            return (.success(response), ContinuousClock.now - started)
        } catch {
            return (.failure(error), ContinuousClock.now - started)
        }
    }

    @Test func aSuccessfulBodyWithoutEndIsCutAtTheCap() async throws {
        let server = try HTTPAnswerer(head: "HTTP/1.1 200 OK", bodyBytes: nil)
        let (result, elapsed) = await fetch(server)
        guard case .failure(let error) = result else { Issue.record("an endless body was taken whole?"); return }
        #expect(error.code == .storageError)
        #expect(error.message.contains("HTTP 200") && error.message.contains("passed \(HTTPRequest.defaultMaxBodyInMemory) bytes"), "\(error)")
        #expect(!error.message.contains("secret"), "a presigned query in a message: \(error)")
        // Cut when the cap is passed (16 MiB over loopback), not by a timeout; loose for a loaded machine.
        #expect(elapsed < .seconds(20), "took \(elapsed)")
    }

    /// An error document without end fails at 1 MiB, and keeps its status: a
    /// 5xx is still a server error (retried), a 4xx a refusal.
    @Test(arguments: [503, 403])
    func anErrorBodyWithoutEndIsCutAndKeepsItsStatus(status: Int) async throws {
        let server = try HTTPAnswerer(head: "HTTP/1.1 \(status) Whatever", bodyBytes: nil)
        let (result, elapsed) = await fetch(server)
        guard case .failure(let error) = result else { Issue.record("an endless error body was taken whole?"); return }
        #expect(error.code == .storageError)
        #expect(error.message.contains("HTTP \(status)") && error.message.contains("error body passed \(HTTPRequest.maxErrorBodyInMemory) bytes"),
                "\(error)")
        #expect(elapsed < .seconds(20), "took \(elapsed)")
    }

    /// The cap is inclusive: a body of exactly the cap is kept whole, one byte more is not.
    @Test(arguments: [1, 65_535, 65_536, 200_001])
    func aBodyOfTheCapIsKeptAndOneByteMoreIsNot(cap: Int) async throws {
        let exact = try HTTPAnswerer(head: "HTTP/1.1 200 OK", bodyBytes: cap)
        let (kept, _) = await fetch(exact, cap: cap)
        #expect((try? kept.get())?.body.count == cap, "\(kept)")
        let over = try HTTPAnswerer(head: "HTTP/1.1 200 OK", bodyBytes: cap + 1)
        let (refused, _) = await fetch(over, cap: cap)
        guard case .failure(let error) = refused else { Issue.record("\(cap + 1) bytes under a cap of \(cap) were kept"); return }
        #expect(error.message.contains("passed \(cap) bytes"), "\(error)")
    }

    /// A ranged GET answered with more bytes than the range: the request fails
    /// before any byte lands past the range, where another range of the same
    /// download is written (the length check after the fact came too late).
    @Test func aRangeAnsweredWithMoreBytesWritesNothingPastIt() async throws {
        let server = try HTTPAnswerer(head: "HTTP/1.1 206 Partial Content\r\nETag: \"e\"\r\nContent-Range: bytes 0-9/100", bodyBytes: 300_000)
        let s3 = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: "http://127.0.0.1:\(server.port)"), region: "us-east-1",
                                credentials: AWSCredentials(accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret")))
        let path = try TestPaths.temporaryDirectory("range").appendingPathComponent("file").path
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        defer { close(fd); unlink(path) }
        let before = [UInt8](repeating: UInt8(ascii: "A"), count: 400_000)
        #expect(pwrite(fd, before, before.count, 0) == before.count)
        await #expect { _ = try await s3.getObject(GetObjectInput(bucket: "bkt", key: "k", range: 50...59), into: fd, at: 50, progress: nil) } throws: {
            "\($0)".contains("sent more than the 10 bytes asked for")
        }
        var after = [UInt8](repeating: 0, count: before.count)
        #expect(pread(fd, &after, after.count, 0) == after.count)
        // Counted, not compared with ==: a failed == of 400,000 bytes takes the test library minutes to describe.
        let overwritten = zip(after[60...], before[60...]).filter { $0 != $1 }.count
        #expect(overwritten == 0, "\(overwritten) bytes past the range were written")
    }
}

extension ResponseBodyCapTests {
    /// A range's length is taken without arithmetic that can trap, at the extremes too.
    @Test func aRangesLengthNeverTraps() {
        #expect(S3Client.byteCount(0...9) == 10)
        #expect(S3Client.byteCount(5...5) == 1)
        #expect(S3Client.byteCount(0...Int64.max) == .max)
        #expect(S3Client.byteCount(Int64.min...Int64.max) == .max)
        #expect(S3Client.byteCount(-1...(Int64.max - 1)) == .max)
    }
}
