import FerryCore
import FerryS3
import FerryStorage
import FerryTestSupport
import Foundation
import Synchronization
import Testing

/// A listing is fetched a page at a time, as its objects are taken: the next
/// page is asked for only when the last object of the one before is taken, so
/// a prefix of millions of keys never sits in memory whole.
@Suite struct ListedObjectsTests {
    final class Counter: Sendable {
        let value = Atomic<Int>(0)
        var count: Int { value.load(ordering: .relaxed) }
    }

    /// A server with `pages` pages of three keys each, chained by tokens t1, t2, …;
    /// counts the pages asked for.
    static func pagedServer(pages: Int, asked: Counter) throws -> HTTPAnswerer {
        try HTTPAnswerer { request in
            asked.value.add(1, ordering: .relaxed)
            let line = request.prefix { $0 != "\r\n" }
            let page = line.range(of: "continuation-token=t").map { Int(line[$0.upperBound...].prefix { $0.isNumber }) ?? 0 } ?? 0
            let last = page == pages - 1
            let contents = (0..<3).map { "<Contents><Key>k\(page)-\($0)</Key><Size>\(page * 10 + $0)</Size></Contents>" }.joined()
            return ("HTTP/1.1 200 OK", .fixed(Array(("<?xml version=\"1.0\"?><ListBucketResult><IsTruncated>\(!last)</IsTruncated>"
                + (last ? "" : "<NextContinuationToken>t\(page + 1)</NextContinuationToken>") + contents + "</ListBucketResult>").utf8)))
        }
    }

    func client(_ server: HTTPAnswerer) throws -> S3Client {
        S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: "http://127.0.0.1:\(server.port)"), region: "us-east-1",
                       credentials: AWSCredentials(accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret")))
    }

    @Test func eachPageIsAskedForWhenTheOneBeforeIsTaken() async throws {
        let asked = Counter()
        let server = try Self.pagedServer(pages: 5, asked: asked)
        var iterator = try client(server).objects(bucket: "bkt", prefix: "", pageSize: 3).makeAsyncIterator()
        #expect(asked.count == 0, "asked before anything was taken")
        var keys: [String] = []
        var askedWhenTaken: [Int] = []
        var sizes: [Int64] = []
        while let object = try await iterator.next() {
            keys.append(object.key)
            askedWhenTaken.append(asked.count)
            sizes.append(object.size)
        }
        let expected: [String] = (0..<5).flatMap { page in (0..<3).map { "k\(page)-\($0)" } }
        #expect(keys == expected)
        let expectedSizes: [Int64] = (0..<5).flatMap { page in (0..<3).map { Int64(page * 10 + $0) } }
        #expect(sizes == expectedSizes)
        // Object i was taken when page i / 3 had been asked for, and no later one.
        let expectedAsked: [Int] = (0..<15).map { $0 / 3 + 1 }
        #expect(askedWhenTaken == expectedAsked)
        #expect(asked.count == 5)
        #expect(try await iterator.next() == nil, "an ended listing asked again")
        #expect(asked.count == 5)
    }

    /// The collected form reads the same pages.
    @Test func theWholeListingIsEveryPage() async throws {
        let asked = Counter()
        let server = try Self.pagedServer(pages: 4, asked: asked)
        let all = try await client(server).listObjects(bucket: "bkt", prefix: "")
        let expected: [String] = (0..<4).flatMap { page in (0..<3).map { "k\(page)-\($0)" } }
        #expect(all.map { $0.key } == expected)
        #expect(asked.count == 4)
    }

    /// A listing that breaks off mid-way: the objects of the pages before come
    /// out, then the error; it is never taken for the end.
    @Test func aPageThatFailsEndsTheIterationWithItsError() async throws {
        let server = try HTTPAnswerer { request in
            if request.contains("continuation-token=t1") {
                return ("HTTP/1.1 403 Forbidden", .fixed(Array("<Error><Code>AccessDenied</Code><Message>no</Message></Error>".utf8)))
            }
            return ("HTTP/1.1 200 OK", .fixed(Array(("<?xml version=\"1.0\"?><ListBucketResult><IsTruncated>true</IsTruncated>"
                + "<NextContinuationToken>t1</NextContinuationToken><Contents><Key>first</Key><Size>1</Size></Contents>"
                + "</ListBucketResult>").utf8)))
        }
        var iterator = try client(server).objects(bucket: "bkt", prefix: "").makeAsyncIterator()
        #expect(try await iterator.next()?.key == "first")
        await #expect { _ = try await iterator.next() } throws: { ($0 as? FerryError)?.code == .accessDenied }
    }
}
