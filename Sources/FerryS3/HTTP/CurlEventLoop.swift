import CCurl
import CFerryCurlShim
import FerryCore
import FerryStorage
import Foundation
import Synchronization
import FerryConcurrency

/// A thread that drives many HTTP requests at once with one libcurl multi
/// handle: requests are added from any thread (`submit`), run interleaved on
/// this thread (all of curl's callbacks run here), and end by resuming their
/// continuation. Connections stay in the multi handle's cache between requests.
///
/// It uses curl's socket interface over epoll, so each wakeup touches only
/// the connections that have something to do (`curl_multi_perform` would poll
/// every transfer on every wakeup); an eventfd brings in new and cancelled
/// requests. Everything but `submitted` and `active` belongs to the loop's thread.
final class CurlEventLoop: @unchecked Sendable {
    struct Submission {
        var request: HTTPRequest
        var timeouts: CurlTransport.Timeouts
        var bandwidth: BandwidthLimiter?
        var caBundle: String?
        var cancellation: CancellationFlag
        var continuation: CheckedContinuation<Result<HTTPResponse, FerryError>, Never>
    }

    private let multi: UnsafeMutableRawPointer
    private let epoll: Int32
    private let wakeup: Int32
    private let submitted = Mutex<(queue: [Submission], stopping: Bool)>(([], false))
    private let active = Atomic<Int>(0)
    private var running: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    private var idleHandles: [UnsafeMutableRawPointer] = []
    private let maxIdleHandles: Int
    /// Running requests under a bandwidth limit (only those can be paused).
    private var paced = 0
    /// When curl wants its timeout action (monotonic seconds); nil for never.
    fileprivate var timerDeadline: Double?

    /// At most `maxConnections` sockets open at once (in use or cached).
    init(name: String, maxConnections: Int) {
        guard let multi = curl_multi_init() else { preconditionFailure("curl_multi_init failed") }
        self.multi = multi
        epoll = ferry_epoll_create()
        wakeup = ferry_eventfd()
        precondition(epoll >= 0 && wakeup >= 0, "cannot create the curl event loop's epoll or eventfd")
        ferry_epoll_watch(epoll, wakeup, 1, 0, 1)
        maxIdleHandles = maxConnections
        ferry_curl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, maxConnections)
        ferry_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, maxConnections)
        let context = Unmanaged.passUnretained(self).toOpaque()
        ferry_curl_multi_setopt_socket_function(multi, curlSocketCallback)
        ferry_curl_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, context)
        ferry_curl_multi_setopt_timer_function(multi, curlTimerCallback)
        ferry_curl_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, context)
        // The thread keeps the loop alive until `shutdown` lets it end.
        ProcessThreads.start(name) { [self] in run() }
    }

    /// Requests submitted and not yet finished.
    var activeCount: Int { active.load(ordering: .relaxed) }

    func submit(_ submission: Submission) {
        active.add(1, ordering: .relaxed)
        submitted.withLock { $0.queue.append(submission) }
        wake()
    }

    /// Makes the loop look at its requests now (one was added or cancelled).
    func wake() {
        var one: UInt64 = 1
        _ = write(wakeup, &one, 8)
    }

    /// Ends the thread once its requests are done.
    func shutdown() {
        submitted.withLock { $0.stopping = true }
        wake()
    }

    /// curl's socket callback: which directions to watch `socket` for.
    fileprivate func watch(_ socket: curl_socket_t, _ what: Int32) {
        if what == CURL_POLL_REMOVE {
            ferry_epoll_unwatch(epoll, socket)
        } else {
            ferry_epoll_watch(epoll, socket, what & CURL_POLL_IN != 0 ? 1 : 0, what & CURL_POLL_OUT != 0 ? 1 : 0, 1)
        }
    }

    private func run() {
        var stillRunning: Int32 = 0
        var fds = [Int32](repeating: 0, count: 64)
        var flags = [Int32](repeating: 0, count: 64)
        var woken = true
        var nextSweep = 0.0
        while true {
            var now = BandwidthLimiter.now()
            // Housekeeping costs a walk over the running requests, so it is done
            // when woken (new or cancelled requests) and ten times a second, not on
            // every socket event: a download has tens of thousands of those per GiB.
            if woken || now >= nextSweep {
                let (new, stopping) = submitted.withLock { s in
                    defer { s.queue = [] }
                    return (s.queue, s.stopping)
                }
                new.forEach(start)
                if stopping && running.isEmpty { break }
                // A cancelled or aborted request ends now.
                for (easy, transfer) in running where transfer.exchange.shouldStop {
                    end(easy, CURLE_ABORTED_BY_CALLBACK)
                }
                nextSweep = now + 0.1
            }
            var wakeAt = min(now + 1, nextSweep)
            if paced > 0 {
                for (easy, transfer) in running {
                    guard let at = transfer.exchange.resumeAt else { continue }
                    if at <= now {
                        transfer.exchange.resumeAt = nil
                        curl_easy_pause(easy, 0)  // CURLPAUSE_CONT
                    } else {
                        wakeAt = min(wakeAt, at)
                    }
                }
            }
            if let deadline = timerDeadline { wakeAt = min(wakeAt, deadline) }
            let timeout = Int32(max(0, ((wakeAt - now) * 1000).rounded(.up)))
            let ready = ferry_epoll_wait(epoll, &fds, &flags, 64, timeout)
            woken = false
            for i in 0..<max(0, Int(ready)) {
                if fds[i] == wakeup {
                    var count: UInt64 = 0
                    _ = read(wakeup, &count, 8)
                    woken = true
                } else {
                    curl_multi_socket_action(multi, fds[i], flags[i], &stillRunning)
                }
            }
            now = BandwidthLimiter.now()
            if let deadline = timerDeadline, deadline <= now {
                timerDeadline = nil
                curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &stillRunning)
            }
            var easy: UnsafeMutableRawPointer?
            var code = CURLE_OK
            while ferry_curl_multi_next_done(multi, &easy, &code) == 1, let done = easy {
                end(done, code)
            }
        }
        for easy in idleHandles { curl_easy_cleanup(easy) }
        curl_multi_cleanup(multi)
        close(epoll)
        close(wakeup)
    }

    private func start(_ s: Submission) {
        if s.cancellation.isCancelled {
            active.subtract(1, ordering: .relaxed)
            s.continuation.resume(returning: .failure(FerryError(.cancelled, "\(s.request.method): cancelled before it started")))
            return
        }
        let easy: UnsafeMutableRawPointer
        if let idle = idleHandles.popLast() {
            curl_easy_reset(idle)
            easy = idle
        } else {
            guard let fresh = curl_easy_init() else { preconditionFailure("curl_easy_init failed") }
            easy = fresh
        }
        let transfer = CurlTransfer(handle: easy, request: s.request, timeouts: s.timeouts, bandwidth: s.bandwidth,
                                    caBundle: s.caBundle, cancellation: s.cancellation, continuation: s.continuation)
        running[easy] = transfer
        if s.bandwidth != nil { paced += 1 }
        curl_multi_add_handle(multi, easy)
    }

    private func end(_ easy: UnsafeMutableRawPointer, _ code: CURLcode) {
        guard let transfer = running.removeValue(forKey: easy) else { return }
        if transfer.exchange.bandwidth != nil { paced -= 1 }
        curl_multi_remove_handle(multi, easy)
        let result = transfer.finish(code)
        if idleHandles.count < maxIdleHandles { idleHandles.append(easy) } else { curl_easy_cleanup(easy) }
        active.subtract(1, ordering: .relaxed)
        transfer.continuation.resume(returning: result)
    }
}

private let curlSocketCallback: @convention(c) (UnsafeMutableRawPointer?, curl_socket_t, Int32, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Int32 = { _, socket, what, context, _ in
    guard let context else { return 0 }
    Unmanaged<CurlEventLoop>.fromOpaque(context).takeUnretainedValue().watch(socket, what)
    return 0
}

/// -1: no timeout; 0: act at once; otherwise in that many milliseconds.
private let curlTimerCallback: @convention(c) (UnsafeMutableRawPointer?, Int, UnsafeMutableRawPointer?) -> Int32 = { _, milliseconds, context in
    guard let context else { return 0 }
    let loop = Unmanaged<CurlEventLoop>.fromOpaque(context).takeUnretainedValue()
    loop.timerDeadline = milliseconds < 0 ? nil : BandwidthLimiter.now() + Double(milliseconds) / 1000
    return 0
}
