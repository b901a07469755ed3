import FerryStorage
import Foundation

/// An HTTP request for the curl transport. The URL is already encoded.
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(String, String)]
    public var body: Body
    public var response: ResponseSink
    /// Counts body bytes sent and (2xx) body bytes received, and can abort the request.
    public var progress: TransferMeter?
    /// For remote sources: the addresses this request may connect to (checked on
    /// the resolved address of every connection), a body size cap and a time cap.
    public var addressPolicy: RemoteSourcePolicy?
    /// Sees a successful response while it arrives.
    public var observer: ResponseObserver?
    /// The most of a successful response's body kept in memory (`.memory` sink).
    /// A peer that sends more (a webhook streaming without end, a broken
    /// endpoint) fails the request instead of growing the process.
    public var maxBodyInMemory = HTTPRequest.defaultMaxBodyInMemory

    /// Well above S3's largest answer (a page of 1,000 listed keys of up to 1 KiB
    /// each is under 2 MiB) and Lambda's 6 MB for a response.
    public static let defaultMaxBodyInMemory = 16 << 20
    /// The most of a successful body written to a `.file` sink: a ranged GET's
    /// length. A server that sends more fails the request before the extra
    /// bytes land past the range (in another range's place in the file).
    public var maxBodyToFile: Int64?
    /// The most seconds the whole request may take (nil: only the transport's
    /// connect and low-speed cut-offs bound it).
    public var timeLimitSeconds: Int?
    /// This request's connect and low-speed cut-offs, when they are not the
    /// transport's: instance metadata answers on the local link or not at all,
    /// so its requests give up on a connection after a second.
    public var timeouts: CurlTransport.Timeouts?
    /// The most of an error response's body kept: S3's error documents are a
    /// few hundred bytes. An error body past it fails the request at once
    /// (with its status, so a 5xx is still retried), not when a timeout ends it.
    public static let maxErrorBodyInMemory = 1 << 20

    /// Where the request body comes from.
    public enum Body: Sendable {
        case none
        case bytes([UInt8])
        /// `length` bytes of the open file `descriptor` from `offset`, read with pread.
        case file(descriptor: Int32, offset: Int64, length: Int64)

        public var length: Int64 {
            switch self {
            case .none: return 0
            case .bytes(let b): return Int64(b.count)
            case .file(_, _, let length): return length
            }
        }
    }

    /// Where a successful (2xx) response body goes. Error bodies are always kept in memory.
    public enum ResponseSink: Sendable {
        case memory
        /// Written with pwrite from `offset` into the open file `descriptor`.
        case file(descriptor: Int32, offset: Int64)
    }

    public init(method: String, url: String, headers: [(String, String)] = [], body: Body = .none,
                response: ResponseSink = .memory, progress: TransferMeter? = nil) {
        self.method = method; self.url = url; self.headers = headers; self.body = body; self.response = response
        self.progress = progress
    }
}

/// Sees a successful (2xx) response while it arrives, on the transport's
/// thread: `head` once its headers are complete (before any body byte), then,
/// for a body bound for a file, `body` with each piece once it is in the file,
/// in file order (pieces of up to the write buffer's 256 KiB; a body kept in
/// memory is not shown piece by piece). Keep both short: they run
/// inside curl's callbacks. A request that fails after its head has been seen
/// still throws; what the observer saw of it is the caller's to discard.
public struct ResponseObserver: Sendable {
    public var head: @Sendable (_ status: Int, _ headers: [String: String]) -> Void
    public var body: @Sendable (UnsafeRawBufferPointer) -> Void

    public init(head: @escaping @Sendable (_ status: Int, _ headers: [String: String]) -> Void,
                body: @escaping @Sendable (UnsafeRawBufferPointer) -> Void = { _ in }) {
        self.head = head; self.body = body
    }
}

/// A response: status, headers (names lowercased), and the body if it went to memory.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [String: String]
    public var body: [UInt8]
    /// Bytes of body received (also when written to a file).
    public var bodyLength: Int64

    public func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// The server's time when it answered (`Date`, whole seconds), if it said a valid one.
    var date: Date? { header("date").flatMap(HTTPDate.parse) }
}

extension ObjectBody {
    var httpBody: HTTPRequest.Body {
        switch self {
        case .bytes(let b): return .bytes(b)
        case .file(let fd, let offset, let length): return .file(descriptor: fd, offset: offset, length: length)
        }
    }
}
