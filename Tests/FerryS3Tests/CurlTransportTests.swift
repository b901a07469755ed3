import FerryCore
@testable import FerryS3
import Foundation
import Testing

/// The transport against a server that accepts connections and never answers.
@Suite struct CurlTransportTests {
    /// A listening socket nobody accepts from: the kernel completes the
    /// handshake, the request is sent, and no byte ever comes back.
    final class SilentServer: Sendable {
        let fd: Int32
        let port: Int
        init() throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = 0
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0, listen(fd, 16) == 0 else { close(fd); throw FerryError(.localIOError, "cannot listen") }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            self.fd = fd
            port = Int(UInt16(bigEndian: address.sin_port))
        }
        deinit { close(fd) }
    }

    /// A cancelled task ends its request within about a second (curl's
    /// progress callback), not at the 30 s low-speed cut-off; the error says cancelled.
    @Test func cancellingTheTaskAbortsASilentRequest() async throws {
        let server = try SilentServer()
        let transport = CurlTransport()
        let started = ContinuousClock.now
        let request = Task { @Sendable () async throws -> HTTPResponse in
            try await transport.execute(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/never"))
        }
        try await Task.sleep(for: .milliseconds(500))
        request.cancel()
        let result = await request.result
        let elapsed = ContinuousClock.now - started
        guard case .failure(let error) = result else { Issue.record("a silent server answered?"); return }
        #expect((error as? FerryError)?.code == .cancelled, "\(error)")
        #expect(elapsed < .seconds(10), "took \(elapsed); the low-speed cut-off is 30 s")
        #expect(transport.connectionsInUse == 0)
    }

    /// A task cancelled while it waits for a connection does not send its request.
    @Test func aRequestCancelledBeforeItStartsIsNotSent() async throws {
        let server = try SilentServer()
        let transport = CurlTransport(limits: .init(maxConnections: 1))
        let holder = Task { @Sendable () async throws -> HTTPResponse in
            try await transport.execute(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/first"))
        }
        try await Task.sleep(for: .milliseconds(300))
        let waiting = Task { @Sendable () async throws -> HTTPResponse in
            try await transport.execute(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/second"))
        }
        try await Task.sleep(for: .milliseconds(300))
        waiting.cancel()
        holder.cancel()
        for task in [holder, waiting] {
            guard case .failure(let error) = await task.result else { Issue.record("answered?"); continue }
            #expect((error as? FerryError)?.code == .cancelled, "\(error)")
        }
    }
}
