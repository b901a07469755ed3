@testable import FerryLocalStore
@testable import FerryS3
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// A child process the tests start holds none of the test process's
/// descriptors. Sockets opened without O_CLOEXEC (libcurl's, a test's own)
/// lived on in every child started meanwhile: a connection the loopback
/// server had closed stayed open for its client, which sent its next request
/// into it and waited out curl's 30 s cut-off (a full run failed
/// HeaderInjectionTests that way).
@Suite struct SpawnedChildTests {
    @Test func aChildInheritsNoDescriptorBeyondItsStandardStreams() async throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)  // no O_CLOEXEC
        try #require(fd > 2)
        defer { close(fd) }
        let seen = try await runCommand("/bin/sh", ["-c", "if [ -e /proc/$$/fd/\(fd) ]; then echo inherited; else echo clean; fi"])
        #expect(seen.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "clean", "descriptor \(fd): \(seen.stdout)")
    }

    /// A child started while the server holds a connection (as another test
    /// starts a worker at that moment): the server's close still reaches the
    /// client, whose next request goes out on a new connection at once.
    @Test func aConnectionClosedByItsServerIsClosedForItsClient() async throws {
        let requests = SharedCounter()
        // Kept alive: the client keeps the connection for its next request, and
        // the answerer closes it without a shutdown, so only its last holder's close ends it.
        let server = try HTTPAnswerer(keepsAlive: true) { _ in
            requests.add()
            if requests.value == 1 {
                _ = Task { _ = try? await runCommand("/bin/sleep", ["20"], timeout: 60) }
                Thread.sleep(forTimeInterval: 0.3)  // the child is started while this connection is open
            }
            return ("HTTP/1.1 200 OK", .filler(2))
        }
        let transport = CurlTransport()
        #expect(try await transport.execute(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/a", headers: [])).status == 200)
        let started = ContinuousClock.now
        let second = try await transport.execute(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/b", headers: []))
        let took = started.duration(to: .now)
        #expect(second.status == 200 && took < .seconds(10), "the second request took \(took)")
    }
}
