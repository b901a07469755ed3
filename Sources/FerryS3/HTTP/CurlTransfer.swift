import CCurl
import CFerryCurlShim
import FerryCore
import FerryStorage
import Foundation

/// One request on a libcurl easy handle: the handle's options, set from the
/// `HTTPRequest`; the state curl's callbacks share (`Exchange`); and the
/// request's result once curl is done with it. Lives on its event loop's thread.
final class CurlTransfer {
    let handle: UnsafeMutableRawPointer
    let exchange: Exchange
    let continuation: CheckedContinuation<Result<HTTPResponse, FerryError>, Never>
    private let box: Unmanaged<Exchange>
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>

    /// Sets `handle` (fresh or reset) up for `request`; the loop then adds it to its multi handle.
    init(handle: UnsafeMutableRawPointer, request: HTTPRequest, timeouts: CurlTransport.Timeouts, bandwidth: BandwidthLimiter?,
         caBundle: String?, cancellation: CancellationFlag,
         continuation: CheckedContinuation<Result<HTTPResponse, FerryError>, Never>) {
        self.handle = handle
        self.continuation = continuation
        exchange = Exchange(request: request, bandwidth: bandwidth, cancellation: cancellation)
        box = Unmanaged.passRetained(exchange)
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        for (name, value) in request.headers {
            headerList = curl_slist_append(headerList, "\(name): \(value)")
        }
        // No 100-continue round trip; curl's default Accept is harmless and unsigned.
        headerList = curl_slist_append(headerList, "Expect:")
        let context = box.toOpaque()
        ferry_curl_setopt_string(handle, CURLOPT_URL, request.url)
        // The path goes out as signed: libcurl would otherwise remove `.` and `..`
        // segments (RFC 3986 §5.2.4), addressing another key than the one authorised.
        ferry_curl_setopt_long(handle, CURLOPT_PATH_AS_IS, 1)
        ferry_curl_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList)
        ferry_curl_setopt_ptr(handle, CURLOPT_ERRORBUFFER, errorBuffer)
        ferry_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        // Called at least once a second, even while the server is silent: how a
        // cancelled task ends its request without waiting for the low-speed cut-off.
        ferry_curl_setopt_long(handle, CURLOPT_NOPROGRESS, 0)
        ferry_curl_setopt_xferinfo_function(handle, curlProgressCallback)
        ferry_curl_setopt_ptr(handle, CURLOPT_XFERINFODATA, context)
        ferry_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT, timeouts.connectSeconds)
        ferry_curl_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, timeouts.lowSpeedBytesPerSecond)
        ferry_curl_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, timeouts.lowSpeedSeconds)
        ferry_curl_setopt_long(handle, CURLOPT_TCP_NODELAY, 1)
        if let size = CurlTransport.receiveBufferSize(for: request) { ferry_curl_setopt_long(handle, CURLOPT_BUFFERSIZE, size) }
        ferry_curl_setopt_long(handle, CURLOPT_UPLOAD_BUFFERSIZE, CurlTransport.uploadBufferSize(forBody: request.body.length))
        if let caBundle { ferry_curl_setopt_string(handle, CURLOPT_CAINFO, caBundle) }
        // The shorter of the request's own limit and a remote source's.
        var timeLimit = request.timeLimitSeconds
        if let sourceLimit = request.addressPolicy?.timeoutSeconds { timeLimit = min(timeLimit ?? sourceLimit, sourceLimit) }
        if let timeLimit { ferry_curl_setopt_long(handle, CURLOPT_TIMEOUT, max(1, timeLimit)) }
        if let policy = request.addressPolicy {
            ferry_curl_setopt_opensocket_function(handle, curlOpenSocketCallback)
            ferry_curl_setopt_ptr(handle, CURLOPT_OPENSOCKETDATA, context)
            ferry_curl_setopt_off(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(policy.maxBytes))
            ferry_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")
            ferry_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0)  // hops are checked one by one
        }
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
    }

    deinit {
        box.release()
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    /// The request's outcome, from curl's result code and what the callbacks saw.
    func finish(_ code: CURLcode) -> Result<HTTPResponse, FerryError> {
        let request = exchange.request
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
            let detail = String(cBuffer: UnsafeBufferPointer(start: errorBuffer, count: Int(CURL_ERROR_SIZE)))
            let text = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
            return .failure(FerryError(.connectionError, "\(request.method) \(redactedURL(request.url)): \(text) (curl \(code.rawValue))"))
        }
        return .success(HTTPResponse(status: status, headers: exchange.headers, body: exchange.body,
                                     bodyLength: exchange.received))
    }

}
