import CCurl
import CFerryCurlShim
import FerryCore
import FerryStorage
import Foundation

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
        // A large piece (curl reads up to its 256 KiB buffer at once) is written
        // as it is, after what is buffered: copying it first gains nothing.
        if length >= CurlTransport.fileWriteBufferSize / 4 {
            guard flushFileBuffer() else { return false }
            pendingStart = offset + received + Int64(length)
            return writeFile(data, length, at: offset + received)
        }
        if pending == nil {
            pending = UnsafeMutableRawPointer.allocate(byteCount: CurlTransport.fileWriteBufferSize, alignment: 4096)
            pendingStart = offset + received
        }
        if pendingCount + length > CurlTransport.fileWriteBufferSize {
            guard flushFileBuffer() else { return false }
            pendingStart = offset + received
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
        // The observer sees a file's bytes once they are in it, in file order.
        if headSeen { request.observer?.body(UnsafeRawBufferPointer(start: data, count: length)) }
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
    /// The request's observer has been shown this response's head.
    var headSeen = false

    /// Paused by the bandwidth limit until then (monotonic seconds); the loop resumes it.
    var resumeAt: Double?
    /// The chunk curl hands over again after a pause has already booked its time.
    var prepaid = false

    /// False when the bandwidth limit wants `bytes` to wait: the callback then
    /// returns curl's pause code, and the same chunk comes back after `resumeAt`.
    func mayMove(_ bytes: Int) -> Bool {
        guard let bandwidth else { return true }
        if prepaid {
            prepaid = false
            return true
        }
        let wait = bandwidth.book(bytes)
        guard wait > 0.002 else { return true }
        prepaid = true
        resumeAt = BandwidthLimiter.now() + wait
        return false
    }

    func count(_ n: Int) {
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

/// CURL_WRITEFUNC_PAUSE and CURL_READFUNC_PAUSE: curl keeps the chunk until `curl_easy_pause` resumes the request.
private let curlPause = 0x1000_0001

let curlHeaderCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { data, size, count, context in
    let length = size * count
    guard let data, let context else { return length }
    let exchange = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue()
    // Parsed as bytes: Foundation's trimming was a noticeable share of a small request's CPU.
    let bytes = UnsafeRawBufferPointer(start: data, count: length)
    func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0D || b == 0x0A }
    var end = bytes.count
    while end > 0 && isSpace(bytes[end - 1]) { end -= 1 }
    let line = bytes[0..<end]
    if end == 0 {
        // The blank line that ends a response's headers (also after a 100 Continue).
        if (200..<300).contains(exchange.status), !exchange.headSeen, let observer = exchange.request.observer {
            exchange.headSeen = true
            observer.head(exchange.status, exchange.headers)
        }
        return length
    }
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

let curlWriteCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { data, size, count, context in
    let length = size * count
    guard let data, let context else { return length }
    let exchange = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue()
    if exchange.shouldStop { return 0 }  // curl stops with CURLE_WRITE_ERROR
    if let cap = exchange.request.addressPolicy?.maxBytes, exchange.received + Int64(length) > cap {
        exchange.localError = FerryError(.sourceTooLarge, "source is larger than \(cap) bytes")
        return 0
    }
    if exchange.bodyToFile != nil, let cap = exchange.request.maxBodyToFile, exchange.received + Int64(length) > cap {
        exchange.localError = FerryError(.storageError, "\(exchange.request.method) \(redactedURL(exchange.request.url)) failed with HTTP "
            + "\(exchange.status): the server sent more than the \(cap) bytes asked for")
        return 0
    }
    if exchange.bodyToFile != nil, !exchange.mayMove(length) { return curlPause }
    if exchange.bodyToFile != nil {
        guard exchange.bufferForFile(UnsafeRawPointer(data), length) else { return 0 }  // CURLE_WRITE_ERROR
    } else {
        let success = (200..<300).contains(exchange.status)
        let cap = success ? exchange.request.maxBodyInMemory : HTTPRequest.maxErrorBodyInMemory
        guard exchange.body.count + length <= cap else {
            let method = exchange.request.method, url = redactedURL(exchange.request.url)
            exchange.localError = FerryError(.storageError, "\(method) \(url) failed with HTTP \(exchange.status): its "
                + "\(success ? "" : "error ")body passed \(cap) bytes, more than is kept in memory")
            return 0  // CURLE_WRITE_ERROR: the transfer ends now
        }
        exchange.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length))
    }
    if exchange.bodyToFile != nil { exchange.count(length) }
    exchange.received += Int64(length)
    return length
}

/// Non-zero stops the request (CURLE_ABORTED_BY_CALLBACK).
let curlProgressCallback: @convention(c) (UnsafeMutableRawPointer?, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> Int32 = { context, _, _, _, _ in
    guard let context else { return 0 }
    return Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue().shouldStop ? 1 : 0
}

/// Opens each socket only after checking the address curl resolved against the request's policy.
let curlOpenSocketCallback: @convention(c) (UnsafeMutableRawPointer?, curlsocktype, UnsafeMutablePointer<curl_sockaddr>?) -> curl_socket_t = { context, _, address in
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
        return ok ? String(cBuffer: buffer) : "?"
    }
}

let curlSeekCallback: @convention(c) (UnsafeMutableRawPointer?, curl_off_t, Int32) -> Int32 = { context, offset, origin in
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

let curlReadCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { buffer, size, count, context in
    guard let buffer, let context else { return 0 }
    let exchange = Unmanaged<Exchange>.fromOpaque(context).takeUnretainedValue()
    if exchange.shouldStop { return Int(CURL_READFUNC_ABORT) }
    let capacity = size * count
    let remaining = Int(exchange.request.body.length - exchange.sent)
    let wanted = min(capacity, remaining)
    guard wanted > 0 else { return 0 }
    if !exchange.mayMove(wanted) { return curlPause }
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

/// A URL fit for a message: presigned URLs carry credentials in the query, never printed.
/// A URL as failures name it: without its query (presigned signatures, tokens)
/// and without user info (`user:password@`).
public func redactedURL(_ url: String) -> String {
    var text = url.split(separator: "?", maxSplits: 1).first.map(String.init) ?? url
    if let scheme = text.range(of: "://") {
        let authorityEnd = text[scheme.upperBound...].firstIndex(of: "/") ?? text.endIndex
        if let at = text[scheme.upperBound..<authorityEnd].lastIndex(of: "@") {
            text.replaceSubrange(scheme.upperBound...at, with: "")
        }
    }
    return text
}
