import Foundation

/// An HTTP peer that answers every request with `head`, then `bodyBytes` bytes
/// of body, or (nil) chunks without end until the client hangs up: a webhook or
/// endpoint that sends more than anyone should keep. Or, with `body`, the same
/// document every time (a broken S3 listing, say); or, with `answering`, what
/// a function of the request's head says (the head is ignored for `hangUp`).
public final class HTTPAnswerer: Sendable {
    /// `filler(nil)`: chunks without end; `hangUp`: the connection closed with no answer at all;
    /// `silence`: the connection kept open with no answer until the client gives up.
    public enum Body: Sendable { case filler(Int?), fixed([UInt8]), hangUp, silence }
    private let listener: LoopbackListener
    public var port: Int { listener.port }

    public convenience init(head: String, bodyBytes: Int?) throws {
        try self.init(answering: { _ in (head, .filler(bodyBytes)) })
    }

    public convenience init(head: String, body: String) throws {
        try self.init(answering: { _ in (head, .fixed(Array(body.utf8))) })
    }

    /// `keepsAlive`: answers do not say `Connection: close`, so a client keeps
    /// the connection for its next request, and the answerer then just closes
    /// it, as a server drops an idle kept-alive connection. Otherwise every
    /// answer says `Connection: close` and ends as `closeGracefully` says.
    public init(keepsAlive: Bool = false, answering: @escaping @Sendable (_ requestHead: String) -> (head: String, body: Body)) throws {
        listener = try LoopbackListener { connection in
            Thread { Self.answer(connection, keepsAlive: keepsAlive, with: answering) }.start()
        }
    }

    static func answer(_ connection: Int32, keepsAlive: Bool, with answering: (String) -> (head: String, body: Body)) {
        var lingering = !keepsAlive
        let closing = keepsAlive ? "" : "\r\nConnection: close"
        defer {
            if lingering { Self.closeGracefully(connection) }
            close(connection)
        }
        var request: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        // The head ends at the first blank line (a request body may follow in the same read; it is not read).
        while !request.indices.dropLast(3).contains(where: { request[$0..<$0 + 4].elementsEqual("\r\n\r\n".utf8) }) {
            let n = recv(connection, &buffer, buffer.count, 0)
            if n <= 0 { return }
            request += buffer[0..<n]
        }
        let (head, body) = answering(String(decoding: request, as: UTF8.self))
        if case .hangUp = body { lingering = false; return }
        if case .silence = body {
            while recv(connection, &buffer, buffer.count, 0) > 0 {}  // whatever body comes, then the client's hang-up
            return
        }
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
            _ = send(Array("\(head)\r\nContent-Length: \(document.count)\(closing)\r\n\r\n".utf8) + document)
            return
        }
        guard case .filler(let bodyBytes) = body else { return }
        let piece = [UInt8](repeating: UInt8(ascii: "z"), count: 64 << 10)
        if let total = bodyBytes {
            guard send(Array("\(head)\r\nContent-Length: \(total)\(closing)\r\n\r\n".utf8)) else { return }
            var left = total
            while left > 0 {
                guard send(Array(piece.prefix(left))) else { return }
                left -= min(left, piece.count)
            }
        } else {
            guard send(Array("\(head)\r\nTransfer-Encoding: chunked\(closing)\r\n\r\n".utf8)) else { return }
            let chunk = Array(String(piece.count, radix: 16).utf8) + Array("\r\n".utf8) + piece + Array("\r\n".utf8)
            while send(chunk) {}
        }
    }

    /// Closing with request bytes still unread (a POST body that came after
    /// its head, which is all `answer` reads) makes the kernel reset the
    /// connection, and the reset can discard answer bytes the client has not
    /// read yet (RFC 9112, 9.6). So the answer is ended with a FIN, and what
    /// the client still sends is read and dropped until it hangs up, for at
    /// most 10 s. Such answers say `Connection: close`, so clients do hang up.
    static func closeGracefully(_ connection: Int32) {
        shutdown(connection, Int32(SHUT_WR))
        var limit = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var sink = [UInt8](repeating: 0, count: 4096)
        while recv(connection, &sink, sink.count, 0) > 0 {}
    }
}
