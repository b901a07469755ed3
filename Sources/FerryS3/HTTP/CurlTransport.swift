import CCurl
import CFerryCurlShim
import FerryCore
import Foundation
import Synchronization

/// Sends HTTP requests with libcurl. Each request runs on a thread of its own
/// dispatch queue, never on Swift's cooperative pool, because curl_easy_perform
/// blocks. Easy handles are reused so their connections stay alive.
///
/// A worker makes one and shares it (S3, remote sources, webhook targets,
/// the triggers' object store), so its limits hold for the whole process.
/// Cancelling the calling task aborts the request within a fraction of a
/// second (curl's progress callback), whatever the server does.
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
    private let idleHandles = Mutex<[CurlEasyHandle]>([])
    private let queue = DispatchQueue(label: "ferry.curl", qos: .userInitiated, attributes: .concurrent)

    public init(timeouts: Timeouts = Timeouts(), limits: Limits = Limits(), caBundle: String? = nil) {
        CurlGlobal.initialize()
        self.timeouts = timeouts
        self.limits = limits
        self.caBundle = caBundle
        self.connections = AsyncSemaphore(limit: max(1, limits.maxConnections))
        self.bandwidth = limits.bandwidthBytesPerSecond.map { BandwidthLimiter(bytesPerSecond: $0) }
        self.buffers = ByteBudget(capacity: max(1, limits.maxBufferedBytes))
    }

    /// Requests running now (at most `limits.maxConnections`).
    public var connectionsInUse: Int { connections.inUse }
    /// Bytes held in memory by requests now (at most `limits.maxBufferedBytes`).
    public var bufferedBytesInUse: Int64 { buffers.inUse }

    /// libcurl's receive buffer (CURLOPT_BUFFERSIZE) and upload buffer (CURLOPT_UPLOAD_BUFFERSIZE).
    static let receiveBufferSize = 64 << 10
    static let uploadBufferSize = 256 << 10
    /// Downloads to a file are gathered here and written in large pieces:
    /// curl hands over at most 16 KiB per callback, and a pwrite each was a
    /// fifth of a download's time in syscalls.
    static let fileWriteBufferSize = 256 << 10

    /// libcurl's version line, e.g. `libcurl/7.88.1 OpenSSL/3.0.17 …`.
    public static var libcurlVersion: String { String(cString: curl_version()) }

    public func execute(_ request: HTTPRequest) async throws(FerryError) -> HTTPResponse {
        var footprint = Int64(Self.receiveBufferSize + Self.uploadBufferSize)
        if case .bytes(let body) = request.body { footprint += Int64(body.count) }
        if case .file = request.response { footprint += Int64(Self.fileWriteBufferSize) }
        let reserved = await buffers.reserve(footprint)
        defer { buffers.release(reserved) }
        await connections.acquire()
        defer { connections.release() }
        let cancellation = CancellationFlag()
        let result: Result<HTTPResponse, FerryError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                queue.async {
                    let handle = self.idleHandles.withLock { $0.popLast() } ?? CurlEasyHandle()
                    let result = handle.perform(request, timeouts: self.timeouts, bandwidth: self.bandwidth,
                                                caBundle: self.caBundle, cancellation: cancellation)
                    self.idleHandles.withLock { $0.append(handle) }
                    continuation.resume(returning: result)
                }
            }
        } onCancel: {
            cancellation.cancel()
        }
        return try result.get()
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

/// One libcurl easy handle and the state of the request it is running.
final class CurlEasyHandle: @unchecked Sendable {
    // Used by one thread at a time: CurlTransport hands it out from a locked pool.
    private let handle: UnsafeMutableRawPointer

    init() {
        guard let h = curl_easy_init() else { preconditionFailure("curl_easy_init failed") }
        handle = h
    }

    deinit { curl_easy_cleanup(handle) }

    func perform(_ request: HTTPRequest, timeouts: CurlTransport.Timeouts, bandwidth: BandwidthLimiter?,
                 caBundle: String?, cancellation: CancellationFlag = CancellationFlag()) -> Result<HTTPResponse, FerryError> {
        curl_easy_reset(handle)
        let exchange = Exchange(request: request, bandwidth: bandwidth, cancellation: cancellation)
        if cancellation.isCancelled {
            return .failure(FerryError(.cancelled, "\(request.method) \(redactedURL(request.url)): cancelled before it started"))
        }
        let box = Unmanaged.passRetained(exchange)
        defer { box.release() }
        var headerList: UnsafeMutablePointer<curl_slist>? = nil
        defer { curl_slist_free_all(headerList) }
        for (name, value) in request.headers {
            headerList = curl_slist_append(headerList, "\(name): \(value)")
        }
        // No 100-continue round trip; curl's default Accept is harmless and unsigned.
        headerList = curl_slist_append(headerList, "Expect:")
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)

        let code: CURLcode = errorBuffer.withUnsafeMutableBufferPointer { errorBuf in
            ferry_curl_setopt_string(handle, CURLOPT_URL, request.url)
            // The path goes out as signed: libcurl would otherwise remove `.` and `..`
            // segments (RFC 3986 §5.2.4), addressing another key than the one authorised.
            ferry_curl_setopt_long(handle, CURLOPT_PATH_AS_IS, 1)
            ferry_curl_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList)
            ferry_curl_setopt_ptr(handle, CURLOPT_ERRORBUFFER, errorBuf.baseAddress)
            ferry_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
            // Called at least once a second, even while the server is silent: how a
            // cancelled task ends its request without waiting for the low-speed cut-off.
            ferry_curl_setopt_long(handle, CURLOPT_NOPROGRESS, 0)
            ferry_curl_setopt_xferinfo_function(handle, curlProgressCallback)
            ferry_curl_setopt_ptr(handle, CURLOPT_XFERINFODATA, box.toOpaque())
            ferry_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT, timeouts.connectSeconds)
            ferry_curl_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, timeouts.lowSpeedBytesPerSecond)
            ferry_curl_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, timeouts.lowSpeedSeconds)
            ferry_curl_setopt_long(handle, CURLOPT_TCP_NODELAY, 1)
            ferry_curl_setopt_long(handle, CURLOPT_BUFFERSIZE, CurlTransport.receiveBufferSize)
            ferry_curl_setopt_long(handle, CURLOPT_UPLOAD_BUFFERSIZE, CurlTransport.uploadBufferSize)
            if let caBundle { ferry_curl_setopt_string(handle, CURLOPT_CAINFO, caBundle) }
            if let policy = request.addressPolicy {
                ferry_curl_setopt_opensocket_function(handle, curlOpenSocketCallback)
                ferry_curl_setopt_ptr(handle, CURLOPT_OPENSOCKETDATA, box.toOpaque())
                ferry_curl_setopt_off(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(policy.maxBytes))
                ferry_curl_setopt_long(handle, CURLOPT_TIMEOUT, policy.timeoutSeconds)
                ferry_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")
                ferry_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0)  // hops are checked one by one
            }
            let context = box.toOpaque()
            ferry_curl_setopt_header_function(handle, curlHeaderCallback)
            ferry_curl_setopt_ptr(handle, CURLOPT_HEADERDATA, context)
            ferry_curl_setopt_write_function(handle, curlWriteCallback)
            ferry_curl_setopt_ptr(handle, CURLOPT_WRITEDATA, context)
            switch request.method {
            case "GET": break
            case "HEAD": ferry_curl_setopt_long(handle, CURLOPT_NOBODY, 1)
            default: ferry_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, request.method)
            }
            if case .none = request.body, request.method != "PUT" && request.method != "POST" {
                // No body.
            } else {
                ferry_curl_setopt_long(handle, CURLOPT_UPLOAD, 1)
                ferry_curl_setopt_off(handle, CURLOPT_INFILESIZE_LARGE, curl_off_t(request.body.length))
                ferry_curl_setopt_read_function(handle, curlReadCallback)
                ferry_curl_setopt_ptr(handle, CURLOPT_READDATA, context)
                // Lets curl rewind the body itself (e.g. a reused connection that turned out closed).
                ferry_curl_setopt_seek_function(handle, curlSeekCallback)
                ferry_curl_setopt_ptr(handle, CURLOPT_SEEKDATA, context)
            }
            return curl_easy_perform(handle)
        }
        var status = 0
        ferry_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        if code == CURLE_OK { exchange.flushFileBuffer() }
        if exchange.localError != nil || code != CURLE_OK || !(200..<300).contains(status) {
            // A failed attempt's bytes do not count: its retry sends them again.
            request.progress?.add(-exchange.counted)
        }
        if let ioError = exchange.localError {
            return .failure(ioError)
        }
        if request.progress?.isAborted == true || exchange.cancellation.isCancelled {
            return .failure(FerryError(.cancelled, "\(request.method) \(redactedURL(request.url)): transfer cancelled"))
        }
        if code == CURLE_FILESIZE_EXCEEDED, let cap = request.addressPolicy?.maxBytes {
            return .failure(FerryError(.sourceTooLarge, "source is larger than \(cap) bytes"))
        }
        guard code == CURLE_OK else {
            let detail = String(decoding: errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let text = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
            return .failure(FerryError(.connectionError, "\(request.method) \(redactedURL(request.url)): \(text) (curl \(code.rawValue))"))
        }
        return .success(HTTPResponse(status: status, headers: exchange.headers, body: exchange.body,
                                     bodyLength: exchange.received))
    }

    private func redactedURL(_ url: String) -> String {
        // Presigned URLs carry credentials in the query; never print it.
        url.split(separator: "?", maxSplits: 1).first.map(String.init) ?? url
    }
}

/// The state of one request shared with curl's C callbacks.
final class Exchange {
    /// Downloaded bytes not yet written to the file, from file offset `pendingStart`.
    private var pending: UnsafeMutableRawPointer?
    private var pendingCount = 0
    private var pendingStart: Int64 = 0

    deinit { pending?.deallocate() }

    /// Adds a chunk of a file download; writes when the buffer is full. False on a write error.
    func bufferForFile(_ data: UnsafeRawPointer, _ length: Int) -> Bool {
        guard let (_, offset) = bodyToFile else { return false }
        if pending == nil {
            pending = UnsafeMutableRawPointer.allocate(byteCount: CurlTransport.fileWriteBufferSize, alignment: 4096)
            pendingStart = offset + received
        }
        if pendingCount + length > CurlTransport.fileWriteBufferSize {
            guard flushFileBuffer() else { return false }
            pendingStart = offset + received
        }
        if length > CurlTransport.fileWriteBufferSize {
            defer { pendingStart = offset + received + Int64(length) }
            return writeFile(data, length, at: offset + received)
        }
        pending!.advanced(by: pendingCount).copyMemory(from: data, byteCount: length)
        pendingCount += length
        return true
    }

    /// Writes what is buffered; false (with `localError` set) when the disk refuses.
    @discardableResult
    func flushFileBuffer() -> Bool {
        guard let pending, pendingCount > 0 else { return true }
        defer { pendingStart += Int64(pendingCount); pendingCount = 0 }
        return writeFile(pending, pendingCount, at: pendingStart)
    }

    private func writeFile(_ data: UnsafeRawPointer, _ length: Int, at position: Int64) -> Bool {
        guard let (fd, _) = bodyToFile else { return false }
        var written = 0
        while written < length {
            let n = pwrite(fd, data + written, length - written, off_t(position + Int64(written)))
            if n < 0 {
                if errno == EINTR { continue }
                localError = FerryError(.localIOError, "cannot write downloaded data: \(String(cString: strerror(errno)))")
                return false
            }
            written += n
        }
        return true
    }

    let request: HTTPRequest
    var headers: [String: String] = [:]
    var status = 0
    var body: [UInt8] = []
    var received: Int64 = 0
    var sent: Int64 = 0
    /// Bytes reported to the request's progress counter.
    var counted: Int64 = 0
    var localError: FerryError?

    func count(_ n: Int) {
        bandwidth?.consume(n)
        guard let progress = request.progress else { return }
        counted += Int64(n)
        progress.add(Int64(n))
    }

    let bandwidth: BandwidthLimiter?
    let cancellation: CancellationFlag

    init(request: HTTPRequest, bandwidth: BandwidthLimiter?, cancellation: CancellationFlag) {
        self.request = request; self.bandwidth = bandwidth; self.cancellation = cancellation
    }

    /// The calling task was cancelled or the transfer aborted: curl should stop.
    var shouldStop: Bool { cancellation.isCancelled || request.progress?.isAborted == true }

    /// Error responses go to memory whatever the sink, so they can be parsed.
    var bodyToFile: (Int32, Int64)? {
        if case .file(let fd, let offset) = request.response, (200..<300).contains(status) { return (fd, offset) }
        return nil
    }
}

private let curlHeaderCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { data, size, count, context in
    let length = size * count
    guard let data, let context else { return length }
    let exchange = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue()
    // Parsed as bytes: Foundation's trimming was a noticeable share of a small request's CPU.
    let bytes = UnsafeRawBufferPointer(start: data, count: length)
    func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0D || b == 0x0A }
    var end = bytes.count
    while end > 0 && isSpace(bytes[end - 1]) { end -= 1 }
    let line = bytes[0..<end]
    if line.starts(with: "HTTP/".utf8) {
        // A new response (after a redirect or 100): start its headers afresh.
        exchange.headers = [:]
        let fields = line.split(separator: 0x20, maxSplits: 2)
        if fields.count >= 2, let s = Int(String(decoding: fields[1], as: UTF8.self)) { exchange.status = s }
    } else if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
        var start = colon + 1
        while start < end && isSpace(bytes[start]) { start += 1 }
        let name = String(decoding: bytes[0..<colon].map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }, as: UTF8.self)
        exchange.headers[name] = String(decoding: bytes[start..<end], as: UTF8.self)
    }
    return length
}

private let curlWriteCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { data, size, count, context in
    let length = size * count
    guard let data, let context else { return length }
    let exchange = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue()
    if exchange.shouldStop { return 0 }  // curl stops with CURLE_WRITE_ERROR
    if let cap = exchange.request.addressPolicy?.maxBytes, exchange.received + Int64(length) > cap {
        exchange.localError = FerryError(.sourceTooLarge, "source is larger than \(cap) bytes")
        return 0
    }
    if exchange.bodyToFile != nil {
        guard exchange.bufferForFile(UnsafeRawPointer(data), length) else { return 0 }  // CURLE_WRITE_ERROR
    } else {
        exchange.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length))
    }
    if exchange.bodyToFile != nil { exchange.count(length) }
    exchange.received += Int64(length)
    return length
}

/// Non-zero stops the request (CURLE_ABORTED_BY_CALLBACK).
private let curlProgressCallback: @convention(c) (UnsafeMutableRawPointer?, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> Int32 = { context, _, _, _, _ in
    guard let context else { return 0 }
    return Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue().shouldStop ? 1 : 0
}

/// Opens each socket only after checking the address curl resolved against the request's policy.
private let curlOpenSocketCallback: @convention(c) (UnsafeMutableRawPointer?, curlsocktype, UnsafeMutablePointer<curl_sockaddr>?) -> curl_socket_t = { context, _, address in
    guard let context, let address else { return -1 }
    let exchange = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue()
    let family = address.pointee.family
    let sockaddrPointer = UnsafeMutableRawPointer(address) + MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr)!
    var bytes: [UInt8] = []
    if family == AF_INET {
        var a = sockaddrPointer.load(as: sockaddr_in.self).sin_addr
        bytes = withUnsafeBytes(of: &a) { Array($0) }
    } else if family == AF_INET6 {
        var a = sockaddrPointer.loadUnaligned(as: sockaddr_in6.self).sin6_addr
        bytes = withUnsafeBytes(of: &a) { Array($0) }
    }
    if let policy = exchange.request.addressPolicy, bytes.isEmpty || !policy.permits(bytes) {
        exchange.localError = FerryError(.forbiddenSource, "source address \(AddressText.format(bytes)) is in a loopback, link-local or private range")
        return -1
    }
    return socket(family, address.pointee.socktype, address.pointee.protocol)
}

/// Addresses as text for messages.
enum AddressText {
    static func format(_ bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        let ok: Bool = bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return false }
            return inet_ntop(bytes.count == 4 ? AF_INET : AF_INET6, base, &buffer, 64) != nil
        }
        return ok ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
    }
}

private let curlSeekCallback: @convention(c) (UnsafeMutableRawPointer?, curl_off_t, Int32) -> Int32 = { context, offset, origin in
    guard let context, origin == SEEK_SET else { return Int32(CURL_SEEKFUNC_CANTSEEK) }
    let exchange = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue()
    guard offset >= 0, Int64(offset) <= exchange.request.body.length else { return Int32(CURL_SEEKFUNC_FAIL) }
    // Bytes sent before the rewind are sent again: take them back from the progress count.
    if exchange.request.progress != nil, exchange.counted > Int64(offset) {
        exchange.request.progress?.add(Int64(offset) - exchange.counted)
        exchange.counted = Int64(offset)
    }
    exchange.sent = Int64(offset)
    return Int32(CURL_SEEKFUNC_OK)
}

private let curlReadCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { buffer, size, count, context in
    guard let buffer, let context else { return 0 }
    let exchange = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue()
    if exchange.shouldStop { return Int(CURL_READFUNC_ABORT) }
    let capacity = size * count
    let remaining = Int(exchange.request.body.length - exchange.sent)
    let wanted = min(capacity, remaining)
    guard wanted > 0 else { return 0 }
    switch exchange.request.body {
    case .none:
        return 0
    case .bytes(let bytes):
        let start = Int(exchange.sent)
        bytes.withUnsafeBufferPointer { src in
            UnsafeMutableRawPointer(buffer).copyMemory(from: src.baseAddress! + start, byteCount: wanted)
        }
        exchange.sent += Int64(wanted)
        exchange.count(wanted)
        return wanted
    case .file(let fd, let offset, _):
        while true {
            let n = pread(fd, buffer, wanted, off_t(offset + exchange.sent))
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                let reason = n == 0 ? "file shrank while it was being sent" : String(cString: strerror(errno))
                exchange.localError = FerryError(.localIOError, "cannot read upload source: \(reason)")
                return Int(CURL_READFUNC_ABORT)
            }
            exchange.sent += Int64(n)
            exchange.count(n)
            return n
        }
    }
}
