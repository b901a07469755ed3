import FerryCore
import FerryEngine
import FerryS3
import FerryStorage
import FerryTestSupport
import Foundation
import Logging
import Testing

/// A download does not trust the server's size with the disk: an object that
/// cannot fit fails before anything is written, with the figures.
@Suite struct DiskSpaceTests {
    /// A server that answers every GET with 100 bytes of an object it says is 1 PiB.
    static let boastingServer = """
    from http.server import BaseHTTPRequestHandler
    from loopback_server import LoopbackServer
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(206)
            self.send_header("Content-Range", "bytes 0-99/1125899906842624")
            self.send_header("Content-Length", "100")
            self.send_header("ETag", '"0123456789abcdef0123456789abcdef-9"')
            self.end_headers()
            self.wfile.write(b"x" * 100)
        def log_message(self, *args): pass
    LoopbackServer(0, H).serve()
    """

    @Test func anObjectLargerThanTheFreeSpaceFailsBeforeWriting() async throws {
        let root = try TestPaths.temporaryDirectory("diskspace")
        defer { try? FileManager.default.removeItem(at: root) }
        let server = try BackgroundProcess(name: "boaster", executable: "python3", arguments: ["-c", Self.boastingServer],
                                           environment: ["PYTHONPATH": TestPaths.python.path], logDirectory: root)
        defer { Task { await server.stop() } }
        let endpoint = "http://127.0.0.1:\(try await server.announcedPort(after: "listening on 127.0.0.1:"))"
        #expect(await eventually(timeout: 20) { await httpAnswers(endpoint) })
        let store = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: endpoint), region: "us-east-1",
                                   credentials: .init(accessKeyId: "testing", secretAccessKey: "testing")))
        let engine = TransferEngine(store: store, dataRoot: try DataRoot(root.path), logger: Logger(label: "test.diskspace"))
        let target = root.appendingPathComponent("out/huge.bin")
        do {
            _ = try await engine.run(TransferJob(request: TransferRequest(id: "huge", op: .download, bucket: "boasts", key: "huge.bin",
                                                                          destination: target.absoluteString), objectKey: "huge.bin"))
            Issue.record("a 1 PiB download was started")
        } catch {
            #expect(error.code == .localIOError)
            #expect(error.message.contains("1125899906842624 bytes") && error.message.contains("free"), "\(error.message)")
        }
        // Neither the file nor its temp file is left behind.
        let left = (try? FileManager.default.contentsOfDirectory(atPath: target.deletingLastPathComponent().path)) ?? []
        #expect(left.isEmpty, "\(left)")
    }
}
