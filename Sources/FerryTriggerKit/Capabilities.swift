import Foundation
import Synchronization

// What a handler may do beyond its event, as narrow protocols. The worker
// implements them over its own storage client, Kafka producer, HTTP
// transport and blocking-work threads; a test can implement them in a few
// lines. Writing an object goes through `TriggerTransfers`, so the write is
// announced like any other and the loop guard sees it.

/// Reads objects from the storage the workers write to.
public protocol ObjectReader: Sendable {
    /// The object at `key`, its bytes read as they are consumed; nil when there is none.
    func object(bucket: String, key: String) async throws -> StoredObject?
}

/// One object: its attributes, and its bytes as an async sequence of chunks.
public struct StoredObject: Sendable {
    /// The object's length in bytes.
    public var size: Int64
    /// The version read; every chunk of `bytes` is of this version.
    public var eTag: String?
    /// As stored with the object.
    public var contentType: String?
    /// The bytes, in order. Reading fails if the object changes meanwhile.
    public var bytes: ObjectBytes

    public init(size: Int64, eTag: String?, contentType: String?, bytes: ObjectBytes) {
        self.size = size; self.eTag = eTag; self.contentType = contentType; self.bytes = bytes
    }
}

/// An object's bytes in chunks, fetched as they are asked for (a chunk is
/// read from storage only when the previous one has been taken).
public struct ObjectBytes: AsyncSequence, Sendable {
    public typealias Element = [UInt8]
    private let makeNext: @Sendable () -> @Sendable () async throws -> [UInt8]?

    /// `makeNext` makes, for each iteration, a function returning the next chunk or nil at the end.
    public init(_ makeNext: @escaping @Sendable () -> @Sendable () async throws -> [UInt8]?) {
        self.makeNext = makeNext
    }

    /// Bytes already in memory, in one chunk.
    public init(_ bytes: [UInt8]) {
        self.init {
            let taken = Once()
            return { taken.take() ? bytes : nil }
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let next: @Sendable () async throws -> [UInt8]?
        public mutating func next() async throws -> [UInt8]? { try await next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(next: makeNext()) }
}

/// Sends messages to Kafka topics.
public protocol MessageSender: Sendable {
    /// Returns once the broker has the message.
    func send(topic: String, key: [UInt8]?, value: [UInt8]) async throws
}

/// Makes HTTP requests.
public protocol HTTPSender: Sendable {
    func send(_ request: TriggerHTTPRequest) async throws -> TriggerHTTPResponse
}

/// An HTTP request a handler makes through `HTTPSender`.
public struct TriggerHTTPRequest: Sendable {
    /// `GET`, `POST`, …
    public var method: String
    /// An encoded URL.
    public var url: String
    /// Name and value pairs, sent in this order.
    public var headers: [(String, String)]
    /// Empty for none.
    public var body: [UInt8]
    /// The most seconds the whole request may take.
    public var timeoutSeconds: Int

    public init(method: String = "GET", url: String, headers: [(String, String)] = [], body: [UInt8] = [], timeoutSeconds: Int = 30) {
        self.method = method; self.url = url; self.headers = headers; self.body = body; self.timeoutSeconds = timeoutSeconds
    }
}

/// The answer to a `TriggerHTTPRequest`, whatever its status (a 4xx or 5xx
/// is an answer, not an error; a connection that fails throws).
public struct TriggerHTTPResponse: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// Header names in lower case.
    public var headers: [String: String]
    /// The body, whole (at most 16 MiB; a longer one fails the request).
    public var body: [UInt8]

    public init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status; self.headers = headers; self.body = body
    }
}

/// Runs blocking work (file I/O, blocking C calls) where it cannot hold up
/// the threads that run handlers.
public protocol BlockingWork: Sendable {
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T
}

/// Runs blocking work on the calling task: for tests and tools, not for a worker.
public struct InlineBlockingWork: BlockingWork {
    public init() {}
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T { try body() }
}

/// True the first time only.
private final class Once: Sendable {
    private let flag = Mutex(false)
    func take() -> Bool { flag.withLock { taken in defer { taken = true }; return !taken } }
}
