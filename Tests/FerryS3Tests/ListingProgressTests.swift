import FerryCore
@testable import FerryLocalStore
@testable import FerryS3
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// A listing ends, whatever the server says: each truncated page must name a
/// place not yet listed, or the listing fails with the reason (it never loops,
/// and never stops early in silence).
@Suite struct ListingProgressTests {
    /// Generated token sequences: every token advanced past is new, a repeat or
    /// a missing token throws, and a page that is not truncated ends the listing.
    @Test func aListingNeverVisitsAPlaceTwice() throws {
        let seed = FuzzReplay.seed
        print("ListingProgressTests seed \(seed)")
        var random = SeededGenerator(seed: seed)
        for _ in 0..<2_000 {
            var progress = ListingProgress(operation: "test")
            var visited: Set<String> = []
            for _ in 0..<Int.random(in: 1...40, using: &random) {
                let truncated = Int.random(in: 0..<10, using: &random) > 0
                let next: String? = [nil, "", "t\(Int.random(in: 0..<12, using: &random))"][Int.random(in: 0..<6, using: &random) == 0 ? Int.random(in: 0...1, using: &random) : 2]
                do {
                    let advanced = try progress.advance(truncated: truncated, next: next)
                    if !truncated { #expect(advanced == nil); break }
                    let token = try #require(advanced)
                    #expect(token == next && visited.insert(token).inserted, "advanced to \(token) again")
                } catch {
                    #expect(truncated)
                    #expect(next == nil || next == "" || visited.contains(next!), "refused a new token: \(error)")
                    #expect((error as? FerryError)?.code == .storageError, "\(error)")
                    break
                }
            }
            #expect(visited.count <= 12)
        }
    }

    func client(_ server: HTTPAnswerer) throws -> S3Client {
        S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: "http://127.0.0.1:\(server.port)"), region: "us-east-1",
                       credentials: AWSCredentials(accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret")))
    }

    static func listing(truncated: Bool, token: String?) -> String {
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><Name>b</Name><Prefix></Prefix><KeyCount>1</KeyCount>"
            + "<MaxKeys>1000</MaxKeys><EncodingType>url</EncodingType><IsTruncated>\(truncated)</IsTruncated>"
            + (token.map { "<NextContinuationToken>\($0)</NextContinuationToken>" } ?? "")
            + "<Contents><Key>a%20key</Key><Size>1</Size><ETag>&quot;e&quot;</ETag></Contents></ListBucketResult>"
    }

    /// A server that names the same continuation token on every page.
    @Test func aServerRepeatingItsTokenEndsTheListingWithAnError() async throws {
        let server = try HTTPAnswerer(head: "HTTP/1.1 200 OK", body: Self.listing(truncated: true, token: "same"))
        let s3 = try client(server)
        await #expect { _ = try await s3.listObjects(bucket: "bkt", prefix: "") } throws: {
            "\($0)".contains("already listed") && "\($0)".contains("never end")
        }
    }

    /// A truncated page naming no token is an error, not the end (the reconciler
    /// would otherwise take every key after it for deleted).
    @Test func aTruncatedPageWithoutATokenIsAnError() async throws {
        let server = try HTTPAnswerer(head: "HTTP/1.1 200 OK", body: Self.listing(truncated: true, token: nil))
        let s3 = try client(server)
        await #expect { _ = try await s3.listObjects(bucket: "bkt", prefix: "p/", continuation: nil, maxKeys: 10) } throws: {
            "\($0)".contains("truncated but named no continuation token")
        }
        // A last page is the end, and its key is decoded (encoding-type=url).
        let last = try HTTPAnswerer(head: "HTTP/1.1 200 OK", body: Self.listing(truncated: false, token: nil))
        #expect(try await client(last).listObjects(bucket: "bkt", prefix: "") == [S3Client.ListedObject(key: "a key", size: 1)])
    }

    @Test func multipartListingsRepeatingTheirMarkersEndWithAnError() async throws {
        let uploads = try HTTPAnswerer(head: "HTTP/1.1 200 OK", body:
            "<?xml version=\"1.0\"?><ListMultipartUploadsResult><Bucket>b</Bucket><IsTruncated>true</IsTruncated>"
            + "<NextKeyMarker>k</NextKeyMarker><NextUploadIdMarker>u</NextUploadIdMarker>"
            + "<Upload><Key>k</Key><UploadId>u</UploadId></Upload></ListMultipartUploadsResult>")
        await #expect { _ = try await client(uploads).listMultipartUploads(bucket: "bkt", prefix: "") } throws: {
            "\($0)".contains("ListMultipartUploads") && "\($0)".contains("already listed")
        }
        let parts = try HTTPAnswerer(head: "HTTP/1.1 200 OK", body:
            "<?xml version=\"1.0\"?><ListPartsResult><IsTruncated>true</IsTruncated><NextPartNumberMarker>7</NextPartNumberMarker>"
            + "<Part><PartNumber>7</PartNumber><ETag>&quot;e&quot;</ETag><Size>5</Size></Part></ListPartsResult>")
        await #expect { _ = try await client(parts).listParts(ObjectLocation(bucket: "bkt", key: "k"), uploadId: "u") } throws: {
            "\($0)".contains("ListParts") && "\($0)".contains("already listed")
        }
    }
}
