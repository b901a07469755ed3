import CCurl
import CFerryCurlShim
import FerryCore
import FerryStorage
import Foundation
import Synchronization
import FerryConcurrency

/// Sends HTTP requests with libcurl's multi interface: one or two event-loop
/// threads (`CurlEventLoop`) drive every connection, so the thread count does
/// not grow with the requests in flight and nothing blocks Swift's cooperative
/// pool. Each loop keeps its connections alive between requests.
///
/// A worker makes one and shares it (S3, remote sources, webhook targets,
/// the triggers' object store), so its limits hold for the whole process:
/// `maxConnections` requests at once, and as many sockets at most (each loop
/// may open its share). Cancelling the calling task ends its request at once.
public final class CurlTransport: Sendable {
    /// Limits that keep a stalled connection from hanging a transfer.
    public struct Timeouts: Sendable {
        public var connectSeconds: Int = 10
        /// A transfer slower than `lowSpeedBytesPerSecond` for `lowSpeedSeconds` is cut.
        public var lowSpeedBytesPerSecond: Int = 1
        public var lowSpeedSeconds: Int = 30
        public init() {}
    }

    /// Connection limits of one transport (one per worker process or `ferry cp`).
    public struct Limits: Sendable {
        /// Requests (hence connections) open at once.
        public var maxConnections: Int = 64
        /// Total body bytes/s across all connections, shared; nil for no limit.
        public var bandwidthBytesPerSecond: Int64?
        /// Bytes held in memory by requests in flight: in-memory bodies plus
        /// libcurl's buffers. File bodies stream by position and count only their buffers.
        public var maxBufferedBytes: Int64 = 64 << 20
        public init(maxConnections: Int = 64, bandwidthBytesPerSecond: Int64? = nil, maxBufferedBytes: Int64 = 64 << 20) {
            self.maxConnections = maxConnections
            self.bandwidthBytesPerSecond = bandwidthBytesPerSecond
            self.maxBufferedBytes = maxBufferedBytes
        }
    }

    private let timeouts: Timeouts
    private let limits: Limits
    private let caBundle: String?
    private let connections: AsyncSemaphore
    private let buffers: ByteBudget
    private let bandwidth: BandwidthLimiter?
    private let loops: [CurlEventLoop]

    /// Makes the transport's event-loop threads: a process makes one transport
    /// and passes it down (`ProcessTransport` in the command line), so that
    /// `--max-connections` and `--max-buffered-bytes` hold for all of it.
    public init(timeouts: Timeouts = Timeouts(), limits: Limits = Limits(), caBundle: String? = nil) {
        CurlGlobal.initialize()
        self.timeouts = timeouts
        self.limits = limits
        self.caBundle = caBundle
        let maxConnections = max(1, limits.maxConnections)
        self.connections = AsyncSemaphore(limit: maxConnections)
        self.bandwidth = limits.bandwidthBytesPerSecond.map { BandwidthLimiter(bytesPerSecond: $0) }
        self.buffers = ByteBudget(capacity: max(1, limits.maxBufferedBytes))
        // Two loops use both cores of a small machine for TLS, hashing and
        // copies; the connection cap is split evenly so the sum stays exact.
        let count = maxConnections >= 4 && maxConnections % 2 == 0 ? 2 : 1
        self.loops = (0..<count).map { CurlEventLoop(name: "ferry-curl-\($0)", maxConnections: maxConnections / count) }
    }

    deinit { loops.forEach { $0.shutdown() } }

    /// Requests running now (at most `limits.maxConnections`).
    public var connectionsInUse: Int { connections.inUse }
    /// Bytes held in memory by requests now (at most `limits.maxBufferedBytes`).
    public var bufferedBytesInUse: Int64 { buffers.inUse }

    /// libcurl's receive buffer (CURLOPT_BUFFERSIZE) and upload buffer (CURLOPT_UPLOAD_BUFFERSIZE).
    static let receiveBufferSize = 256 << 10
    static let uploadBufferSize = 256 << 10
    /// libcurl's own receive buffer size, which `curl_easy_reset` puts back.
    static let defaultReceiveBufferSize = 16 << 10
    /// The smallest upload buffer libcurl accepts (a smaller setting is raised to it).
    static let smallestUploadBufferSize = 16 << 10

    /// The receive buffer for `request`: large for a GET, whose body may be an
    /// object; curl's default for the rest (PUT, HEAD, POST, DELETE), whose
    /// answers are a few headers and at most a small XML document. A handle's
    /// reset shrinks its buffer back to the default and the next setting grows
    /// it again; at 256 KiB, above the worker's mmap threshold
    /// (`HeapTrimmer.mappedFrom`, 128 KiB), that was an mmap and an munmap with
    /// a TLB shootdown on every reuse (S5: 1.9 of each per request).
    static func receiveBufferSize(for request: HTTPRequest) -> Int? {
        request.method == "GET" ? receiveBufferSize : nil
    }

    /// The upload buffer for a body of `length` bytes: no larger than the body
    /// (down to curl's floor). libcurl allocates it for each upload and frees
    /// it when the transfer ends; at 256 KiB that is above the worker's mmap
    /// threshold (`HeapTrimmer.mappedFrom`, 128 KiB), so every small PUT paid
    /// an mmap, its page faults and an munmap with a TLB shootdown.
    static func uploadBufferSize(forBody length: Int64) -> Int {
        Int(min(Int64(uploadBufferSize), max(Int64(smallestUploadBufferSize), length)))
    }
    /// Downloads to a file are gathered here and written in large pieces:
    /// curl hands over at most 16 KiB per callback, and a pwrite each was a
    /// fifth of a download's time in syscalls.
    static let fileWriteBufferSize = 256 << 10

    /// libcurl's version line, e.g. `libcurl/7.88.1 OpenSSL/3.0.17 …`.
    public static var libcurlVersion: String { String(cString: curl_version()) }

    /// What `request` holds in memory while it runs, counted against
    /// `--max-buffered-bytes`: curl's two buffers at the sizes set for it, a
    /// body held in memory, and the write buffer of a body bound for a file.
    static func footprint(of request: HTTPRequest) -> Int64 {
        let receiveBuffer = receiveBufferSize(for: request) ?? defaultReceiveBufferSize
        var footprint = Int64(receiveBuffer + uploadBufferSize(forBody: request.body.length))
        if case .bytes(let body) = request.body { footprint += Int64(body.count) }
        if case .file = request.response { footprint += Int64(fileWriteBufferSize) }
        return footprint
    }

    public func execute(_ request: HTTPRequest) async throws(FerryError) -> HTTPResponse {
        try Self.checkHeaders(request)
        let reserved = await buffers.reserve(Self.footprint(of: request))
        defer { buffers.release(reserved) }
        await connections.acquire()
        defer { connections.release() }
        let cancellation = CancellationFlag()
        // The least busy loop: with the semaphore above, no loop runs more than its share of connections.
        let loop = loops.min { $0.activeCount < $1.activeCount }!
        let result: Result<HTTPResponse, FerryError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                loop.submit(CurlEventLoop.Submission(request: request, timeouts: request.timeouts ?? timeouts, bandwidth: bandwidth, caBundle: caBundle,
                                                     cancellation: cancellation, continuation: continuation))
            }
        } onCancel: {
            cancellation.cancel()
            loop.wake()
        }
        return try result.get()
    }
}

extension CurlTransport {
    /// curl sends each header line as given: a CR or LF in a name or value would
    /// start a header (or a request) of its own, and a NUL would end the line
    /// early. Values come from users (checked where they enter), credentials
    /// endpoints and configuration; whatever their source, such a request is not
    /// sent. The message names the header, never its value (it may be a secret).
    static func checkHeaders(_ request: HTTPRequest) throws(FerryError) {
        for (name, value) in request.headers {
            if let problem = headerLineProblem(name: name, value: value) {
                throw FerryError(.invalidRequest, "\(request.method) not sent: \(problem)")
            }
        }
    }

    /// Why `name: value` cannot go out as one header line, or nil. Names the
    /// header (its printable ASCII), never the value.
    public static func headerLineProblem(name: String, value: String) -> String? {
        func forbidden(_ byte: UInt8) -> Bool { byte == 0x0D || byte == 0x0A || byte == 0 }
        guard name.isEmpty || name.utf8.contains(where: { forbidden($0) || $0 == UInt8(ascii: ":") || $0 == 0x20 })
                || value.utf8.contains(where: forbidden) else { return nil }
        let shown = String(name.unicodeScalars.filter { $0.value >= 0x21 && $0.value < 0x7F }.prefix(64))
        return "header \(shown.debugDescription) holds a line break, a NUL, or (in its name) a colon or space"
    }
}

/// Set when the task that made a request is cancelled; curl's callbacks read it.
final class CancellationFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    func cancel() { flag.store(true, ordering: .releasing) }
    var isCancelled: Bool { flag.load(ordering: .acquiring) }
}

enum CurlGlobal {
    private static let once: Void = { curl_global_init(Int(CURL_GLOBAL_ALL)) }()
    static func initialize() { _ = once }
}

