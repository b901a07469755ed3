import FerryTestSupport
import Foundation
import Testing

/// The test suite's loopback servers come and go by the hundred in one
/// process: a request must be answered by the server it was sent to, never
/// by the thread of one released a moment before (whose socket's number the
/// new server may have been given).
@Suite struct LoopbackListenerTests {
    /// Sends a GET to 127.0.0.1:`port` and reads the answer to its end.
    static func fetch(_ port: Int) throws -> String {
        let fd = try connect(port)
        defer { close(fd) }
        let request = Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            answer += buffer[0..<n]
        }
        return String(decoding: answer, as: UTF8.self)
    }

    struct ConnectionRefused: Error { let port: Int }

    static func connect(_ port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { close(fd); throw ConnectionRefused(port: port) }
        return fd
    }

    /// Each round releases a server just as its accept thread takes a
    /// connection, then asks a new server (often given the released socket's
    /// descriptor number): the answer must be the new server's.
    @Test func eachRequestIsAnsweredByTheServerItWasSentTo() throws {
        var strangers = 0
        for round in 0..<300 {
            var pending: Int32 = -1
            do {
                let released = try HTTPAnswerer(head: "HTTP/1.1 200 OK", body: "released \(round)")
                pending = try Self.connect(released.port)
            }
            defer { close(pending) }
            let server = try HTTPAnswerer(head: "HTTP/1.1 200 OK", body: "server \(round)")
            let answer = try Self.fetch(server.port)
            if !answer.hasSuffix("\r\n\r\nserver \(round)") { strangers += 1 }
        }
        #expect(strangers == 0, "\(strangers) of 300 requests were answered by another server")
    }

    /// curl sends a small POST body from its read callback, after the head;
    /// the answerer reads only the head. If it closed with that body unread,
    /// its kernel would reset the connection, and a reset may discard the
    /// answer's bytes not yet read by the client (RFC 9112, 9.6): the client
    /// then saw a cut or failed answer now and then, by timing. The body comes
    /// here after a pause, so the answerer has read the head alone.
    @Test func anAnswerArrivesWholeWhenTheRequestBodyComesAfterItsHead() throws {
        let document = String(repeating: "x", count: 800_000)
        let server = try HTTPAnswerer(head: "HTTP/1.1 403 Forbidden", body: document)
        var cut: [String] = []
        for round in 0..<5 {
            let fd = try Self.connect(server.port)
            defer { close(fd) }
            func send(_ text: String) {
                _ = Array(text.utf8).withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
            send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
            usleep(50_000)
            send("hello")
            usleep(50_000)
            var answer: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            var failure: Int32 = 0
            while true {
                let n = recv(fd, &buffer, buffer.count, 0)
                if n < 0 { failure = errno }
                if n <= 0 { break }
                answer += buffer[0..<n]
            }
            let ending = Array("\r\n\r\n\(document)".utf8)
            if failure != 0 || !answer.suffix(ending.count).elementsEqual(ending) {
                cut.append("round \(round): \(answer.count) bytes, errno \(failure)")
            }
        }
        #expect(cut.isEmpty, "\(cut)")
    }
}
