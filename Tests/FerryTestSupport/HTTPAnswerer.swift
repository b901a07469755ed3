import Foundation

/// An HTTP peer that answers every request with `head`, then `bodyBytes` bytes
/// of body, or (nil) chunks without end until the client hangs up: a webhook or
/// endpoint that sends more than anyone should keep. Or, with `body`, the same
/// document every time (a broken S3 listing, say); or, with `answering`, what
/// a function of the request's head says.
public final class HTTPAnswerer: Sendable {
    /// `filler(nil)`: chunks without end.
    public enum Body: Sendable { case filler(Int?), fixed([UInt8]) }
    public let port: Int
    private let fd: Int32

    public convenience init(head: String, bodyBytes: Int?) throws {
        try self.init(answering: { _ in (head, .filler(bodyBytes)) })
    }

    public convenience init(head: String, body: String) throws {
        try self.init(answering: { _ in (head, .fixed(Array(body.utf8))) })
    }

    public init(answering: @escaping @Sendable (_ requestHead: String) -> (head: String, body: Body)) throws {
        (fd, port) = try Self.listenOnLoopback()
        let fd = self.fd
        Thread {
            while true {
                let connection = accept(fd, nil, nil)
                if connection < 0 { return }
                Thread { Self.answer(connection, with: answering) }.start()
            }
        }.start()
    }

    deinit { shutdown(fd, Int32(SHUT_RDWR)); close(fd) }

    /// A socket listening on 127.0.0.1 at a port the kernel chose.
    public static func listenOnLoopback() throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else { close(fd); throw CommandFailed(description: "cannot listen on loopback") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    static func answer(_ connection: Int32, with answering: (String) -> (head: String, body: Body)) {
        defer { close(connection) }
        var request: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        // The head ends at the first blank line (a request body may follow in the same read; it is not read).
        while !request.indices.dropLast(3).contains(where: { request[$0..<$0 + 4].elementsEqual("\r\n\r\n".utf8) }) {
            let n = recv(connection, &buffer, buffer.count, 0)
            if n <= 0 { return }
            request += buffer[0..<n]
        }
        let (head, body) = answering(String(decoding: request, as: UTF8.self))
        func send(_ bytes: [UInt8]) -> Bool {
            var sent = 0
            while sent < bytes.count {
                let n = bytes[sent...].withUnsafeBytes { Glibc.send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n <= 0 { return false }
                sent += n
            }
            return true
        }
        if case .fixed(let document) = body {
            _ = send(Array("\(head)\r\nContent-Length: \(document.count)\r\nConnection: close\r\n\r\n".utf8) + document)
            return
        }
        guard case .filler(let bodyBytes) = body else { return }
        let piece = [UInt8](repeating: UInt8(ascii: "z"), count: 64 << 10)
        if let total = bodyBytes {
            guard send(Array("\(head)\r\nContent-Length: \(total)\r\n\r\n".utf8)) else { return }
            var left = total
            while left > 0 {
                guard send(Array(piece.prefix(left))) else { return }
                left -= min(left, piece.count)
            }
        } else {
            guard send(Array("\(head)\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)) else { return }
            let chunk = Array(String(piece.count, radix: 16).utf8) + Array("\r\n".utf8) + piece + Array("\r\n".utf8)
            while send(chunk) {}
        }
    }
}
