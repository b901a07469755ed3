import FerryCore
import FerryEngine
import FerryS3
import FerryStorage
import FerryTestSupport
import Foundation
import Logging
import Testing

/// A download takes from a server at most the bytes it asked for, on every
/// path: a server that says an object is empty (416 to the first range), then
/// answers the whole-object GET without end, must not fill the disk.
@Suite struct BoundedDownloadTests {
    @Test func anEmptyObjectAnsweredWithoutEndFailsAtTheFirstSpan() async throws {
        let server = try HTTPAnswerer { request in
            if request.lowercased().contains("\r\nrange: ") {
                return ("HTTP/1.1 416 Requested Range Not Satisfiable\r\nContent-Type: application/xml",
                        .fixed(Array("<Error><Code>InvalidRange</Code><Message>not satisfiable</Message></Error>".utf8)))
            }
            return ("HTTP/1.1 200 OK\r\nETag: \"d41d8cd98f00b204e9800998ecf8427e\"", .filler(nil))
        }
        let root = try TestPaths.temporaryDirectory("bounded")
        defer { try? FileManager.default.removeItem(at: root) }
        let client = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: "http://127.0.0.1:\(server.port)"), region: "us-east-1",
                                    credentials: .init(accessKeyId: "testing", secretAccessKey: "testing")))
        var configuration = TransferEngine.Configuration()
        configuration.defaults.retryPolicy = RetryPolicy(retryLimit: 1, baseDelaySeconds: 0.01, maxDelaySeconds: 0.01)
        let engine = TransferEngine(store: client, dataRoot: try DataRoot(root.path), configuration: configuration,
                                    logger: Logger(label: "test.bounded"))
        let span = configuration.defaults.multipartThreshold
        let target = root.appendingPathComponent("empty.bin")
        let started = ContinuousClock.now
        await #expect { _ = try await engine.run(TransferJob(request: TransferRequest(id: "b1", op: .download, bucket: "bkt", key: "empty",
                                                                                        destination: target.absoluteString), objectKey: "empty")) }
            throws: { "\($0)".contains("sent more than the \(span) bytes asked for") }
        #expect(ContinuousClock.now - started < .seconds(120))  // a hang is for ever; 30 s were passed under ThreadSanitizer
        #expect(!FileManager.default.fileExists(atPath: target.path))
        // Nothing of the endless body is left behind, in the directory or beside it.
        let left = try FileManager.default.contentsOfDirectory(atPath: root.path)
        #expect(left.isEmpty, "\(left)")
    }
}

/// Invariant: a downloaded file is one version of its object. A store that
/// ignores `If-Match` and serves a later range from another version (its
/// ETag says so) starts the download over, and one that keeps doing so fails
/// it; the ranges are never put together into a file of two versions.
@Suite struct VersionMixTests {
    @Test func rangesOfAnotherVersionAreNeverJoined() async throws {
        let size = 12 << 20
        // The first range (from byte 0) is version A; every later one is version B, whatever If-Match says.
        let server = try HTTPAnswerer { request in
            let lower = request.lowercased()
            guard let at = lower.range(of: "\r\nrange: bytes=") else {
                return ("HTTP/1.1 400 Bad Request", .fixed(Array("<Error><Code>InvalidRequest</Code></Error>".utf8)))
            }
            let spec = lower[at.upperBound...].prefix { $0 != "\r\n" }.split(separator: "-")
            let first = Int(spec[0]) ?? 0, last = min(Int(spec[1]) ?? 0, size - 1)
            let version = first == 0 ? "a" : "b"
            let eTag = String(repeating: version, count: 32) + "-3"
            return ("HTTP/1.1 206 Partial Content\r\nETag: \"\(eTag)\"\r\nContent-Range: bytes \(first)-\(last)/\(size)",
                    .fixed([UInt8](repeating: UInt8(ascii: version == "a" ? "A" : "B"), count: last - first + 1)))
        }
        let root = try TestPaths.temporaryDirectory("version-mix")
        defer { try? FileManager.default.removeItem(at: root) }
        let client = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: "http://127.0.0.1:\(server.port)"), region: "us-east-1",
                                    credentials: .init(accessKeyId: "testing", secretAccessKey: "testing")))
        var configuration = TransferEngine.Configuration()
        configuration.defaults.multipartThreshold = 5 << 20
        configuration.defaults.partSize = 5 << 20
        let engine = TransferEngine(store: client, dataRoot: try DataRoot(root.path), configuration: configuration,
                                    logger: Logger(label: "test.version-mix"))
        let target = root.appendingPathComponent("mixed.bin")
        await #expect { _ = try await engine.run(TransferJob(request: TransferRequest(id: "vm", op: .download, bucket: "bkt", key: "k",
                                                                                        destination: target.absoluteString), objectKey: "k")) }
            throws: { ($0 as? FerryError)?.code == .preconditionFailed && "\($0)".contains("came from another version") }
        #expect(!FileManager.default.fileExists(atPath: target.path), "a file of two versions was put in place")
    }
}
