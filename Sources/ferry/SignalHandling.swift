import Dispatch
import FerryCore
import Foundation
import Logging
import FerryConcurrency

/// Runs `body` and cancels it on SIGINT or SIGTERM, so the worker can stop
/// fetching and commit what is finished. A second signal exits at once, and
/// so does the process when the graceful stop takes longer than
/// `exitWithin` seconds (whatever Kafka, storage or the outbox are doing):
/// what is unfinished is redelivered, and the outbox drains at the next start.
/// What it has to say goes through `logger` (so `--log-format json` stays
/// JSON), and so does the error that ends `body`, before it is rethrown.
func runUntilSignalled(exitWithin bound: Double? = nil, logger: Logger,
                       _ body: @escaping @Sendable () async throws -> Void) async throws {
    // A peer that closes a socket or pipe is an error on that connection, never
    // the end of the process (libcurl and librdkafka avoid SIGPIPE themselves;
    // not every writer does).
    signal(SIGPIPE, SIG_IGN)
    let task = Task { try await body() }
    let sources = [SIGINT, SIGTERM].map { signo -> DispatchSourceSignal in
        signal(signo, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: signo, queue: ProcessThreads.signalQueue)
        source.setEventHandler {
            if task.isCancelled {
                logger.warning("second signal: exiting now")
                exit(128 + signo)
            }
            logger.notice("signal \(signo): shutting down (send again to exit at once)")
            task.cancel()
            if let bound {
                let seconds = bound.isFinite ? min(max(bound, 0), 86_400) : 86_400
                ProcessThreads.after(seconds: seconds) {
                    logger.warning("shutdown still running after \(Int(seconds)) s: exiting now (unfinished work is redelivered; the outbox drains at the next start)")
                    exit(128 + signo)
                }
            }
        }
        source.resume()
        return source
    }
    defer { sources.forEach { $0.cancel() } }
    do {
        try await task.value
    } catch {
        logger.critical("stopped: \(error)")
        throw error
    }
}

/// Flushes `print`'s buffer, so lines reach a pipe (tests, CI logs) promptly.
func flushStandardOutput() {
    fflush(nil)
}
