import FerryCore
@testable import FerryLocalStore
@testable import FerryS3
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Synchronization
import Testing

/// Invariant: a listing page is read only from a whole, well-formed document
/// of the kind asked for; any other 200 answer (a page cut short, a proxy's
/// HTML, an empty body, JSON, noise, another document) fails the listing and
/// never reads as a page with fewer keys: an empty page tells the reconciler
/// that every key is gone, and `cp --recursive` that there is nothing to copy.
@Suite struct ListingDocumentTests {
    /// The document the generated server answers with next.
    final class Answer: Sendable {
        let body = Mutex<[UInt8]>([])
    }

    static func client(_ server: HTTPAnswerer) throws -> S3Client {
        S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: "http://127.0.0.1:\(server.port)"), region: "us-east-1",
                       credentials: AWSCredentials(accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret")))
    }

    static func listing(keys: [String], token: String?) -> String {
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
            + "<Name>bkt</Name><Prefix></Prefix><KeyCount>\(keys.count)</KeyCount><MaxKeys>1000</MaxKeys><EncodingType>url</EncodingType>"
            + "<IsTruncated>\(token != nil)</IsTruncated>" + (token.map { "<NextContinuationToken>\($0)</NextContinuationToken>" } ?? "")
            + keys.enumerated().map { "<Contents><Key>\(SigV4Signer.uriEncode($1))</Key><Size>\($0)</Size><ETag>&quot;e\($0)&quot;</ETag></Contents>" }
            .joined() + "</ListBucketResult>"
    }

    enum Damage: CaseIterable { case none, cut, html, empty, json, noise, otherRoot, errorDocument }

    @Test func aPageIsReadWholeOrNotAtAll() async throws {
        let seed = FuzzReplay.seed
        print("ListingDocumentTests seed \(seed) (FERRY_FUZZ_SEED replays it)")
        var random = SeededGenerator(seed: seed)
        let answer = Answer()
        let server = try HTTPAnswerer { _ in ("HTTP/1.1 200 OK\r\nContent-Type: application/xml", .fixed(answer.body.withLock { $0 })) }
        let s3 = try Self.client(server)
        var seen: [Damage: Int] = [:]
        for round in 0..<300 {
            let keys = (0..<Int.random(in: 0...12, using: &random)).map { n in
                "k\(n)/" + String((0..<Int.random(in: 1...12, using: &random)).map { _ in "ab <&>%+é/😀".randomElement(using: &random)! })
            }
            let token: String? = Bool.random(using: &random) ? "t\(round)" : nil
            let whole = Array(Self.listing(keys: keys, token: token).utf8)
            let damage = Damage.allCases.randomElement(using: &random)!
            seen[damage, default: 0] += 1
            let body: [UInt8]
            switch damage {
            case .none: body = whole
            case .cut: body = Array(whole.prefix(Int.random(in: 1..<whole.count, using: &random)))
            case .html: body = Array("<!DOCTYPE html><html><head><title>Sign in</title></head><body>Proxy</body></html>".utf8)
            case .empty: body = []
            case .json: body = Array(#"{"Contents":[],"IsTruncated":false}"#.utf8)
            case .noise: body = (0..<Int.random(in: 1...300, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            case .otherRoot: body = Array(String(decoding: whole, as: UTF8.self)
                .replacingOccurrences(of: "ListBucketResult", with: "ListAllMyBucketsResult").utf8)
            case .errorDocument: body = Array("<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>no</Message></Error>".utf8)
            }
            answer.body.withLock { $0 = body }
            do {
                let page = try await s3.listObjects(bucket: "bkt", prefix: "", continuation: nil, maxKeys: 1000)
                #expect(damage == .none, "round \(round), seed \(seed): a \(damage) answer read as a page of \(page.items.count) keys")
                #expect(page.items.map(\.key) == keys && page.next == token, "round \(round), seed \(seed)")
            } catch {
                #expect(damage != .none, "round \(round), seed \(seed): a whole page refused: \(error)")
                if damage == .errorDocument {
                    #expect(error.code == .accessDenied, "\(error)")
                } else {
                    #expect(error.code == .storageError && "\(error)".contains("not a whole ListBucketResult document"), "\(error)")
                }
            }
        }
        #expect(seen.count == Damage.allCases.count, "\(seen)")
    }

    /// The parts of an upload and the uploads of a bucket are read the same way:
    /// a resumed upload must not take a proxy's page for "no part stored yet".
    @Test func partAndUploadListingsRefuseWhatIsNotTheirDocument() async throws {
        let server = try HTTPAnswerer(head: "HTTP/1.1 200 OK\r\nContent-Type: text/html", body: "<html><body>Sign in</body></html>")
        let s3 = try Self.client(server)
        await #expect { _ = try await s3.listParts(ObjectLocation(bucket: "bkt", key: "k"), uploadId: "u") } throws: {
            "\($0)".contains("ListParts of bkt/k") && "\($0)".contains("not a whole ListPartsResult document: its root element is <html>")
        }
        await #expect { _ = try await s3.listMultipartUploads(bucket: "bkt", prefix: "") } throws: {
            "\($0)".contains("not a whole ListMultipartUploadsResult document")
        }
    }

    /// S3 may answer CompleteMultipartUpload and CopyObject 200, send white
    /// space while it works, and only then the result, or an error.
    @Test func aResultAfterKeepAliveWhiteSpaceIsRead() throws {
        func response(_ body: String) -> HTTPResponse {
            HTTPResponse(status: 200, headers: [:], body: Array(body.utf8), bodyLength: Int64(body.utf8.count))
        }
        let padding = String(repeating: " \n", count: 40)
        #expect(throws: FerryError.self) {
            _ = try S3Client.resultETag(response(padding + "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InternalError</Code>"
                                                 + "<Message>We encountered an internal error.</Message></Error>"), operation: "CompleteMultipartUpload")
        }
        let eTag = try S3Client.resultETag(response(padding + "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CompleteMultipartUploadResult>"
                                                    + "<ETag>&quot;abc-2&quot;</ETag></CompleteMultipartUploadResult>"), operation: "CompleteMultipartUpload")
        #expect(eTag == "\"abc-2\"")
    }

    /// A completion answered 200 without an ETag (Ceph RGW 16's empty
    /// `<ETag>`, or a proxy's HTML page) is read back with a HEAD, and taken
    /// only when the object there carries these parts' ETag; an SSE-C object is
    /// read back with its key.
    @Test(arguments: [true, false])
    func aCompletionWithoutAnETagIsTakenOnlyForTheseParts(objectIsTheParts: Bool) async throws {
        let a = Digest.md5(Array("one".utf8)).hexString, b = Digest.md5(Array("two".utf8)).hexString
        let parts = [CompletedPart(partNumber: 1, eTag: "\"\(a)\"", size: 3), CompletedPart(partNumber: 2, eTag: "\"\(b)\"", size: 3)]
        let expected = try #require(MultipartETag.of(parts))
        let stored = objectIsTheParts ? expected : "\"0123456789abcdef0123456789abcdef\""
        // An SSE-C object: the HEAD must carry its key (S3 answers 400 without it).
        let key = [UInt8](repeating: 7, count: 32)
        let sse = ["x-amz-server-side-encryption-customer-algorithm": "AES256",
                   "x-amz-server-side-encryption-customer-key": Data(key).base64EncodedString(),
                   "x-amz-server-side-encryption-customer-key-MD5": Data(Digest.md5(key)).base64EncodedString()]
        let server = try HTTPAnswerer { head in
            guard head.hasPrefix("HEAD ") else {
                return ("HTTP/1.1 200 OK\r\nContent-Type: text/html", .fixed(Array("<html><body>Welcome</body></html>".utf8)))
            }
            return head.lowercased().contains("x-amz-server-side-encryption-customer-key: \(sse["x-amz-server-side-encryption-customer-key"]!.lowercased())")
                ? ("HTTP/1.1 200 OK\r\nETag: \(stored)", .fixed([]))
                : ("HTTP/1.1 400 Bad Request", .fixed([]))
        }
        let s3 = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: "http://127.0.0.1:\(server.port)"), region: "us-east-1",
                                credentials: AWSCredentials(accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret")))
        let location = ObjectLocation(bucket: "bkt", key: "k")
        if objectIsTheParts {
            #expect(try await s3.completeMultipartUpload(location, uploadId: "u", parts: parts, headers: sse, wholeChecksum: nil).eTag == expected)
        } else {
            await #expect { _ = try await s3.completeMultipartUpload(location, uploadId: "u", parts: parts, headers: sse, wholeChecksum: nil) } throws: {
                "\($0)".contains("without the object's ETag") && "\($0)".contains("not these parts' \(expected)")
            }
        }
    }
}
