import Dispatch
import Foundation

/// Runs `body` and cancels it on SIGINT or SIGTERM, so the worker can stop
/// fetching and commit what is finished. A second signal exits at once.
func runUntilSignalled(_ body: @escaping @Sendable () async throws -> Void) async throws {
    let task = Task { try await body() }
    let sources = [SIGINT, SIGTERM].map { signo -> DispatchSourceSignal in
        signal(signo, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: signo, queue: .global())
        source.setEventHandler {
            if task.isCancelled {
                FileHandle.standardError.write(Data("second signal: exiting now\n".utf8))
                exit(128 + signo)
            }
            FileHandle.standardError.write(Data("signal \(signo): shutting down (send again to exit at once)\n".utf8))
            task.cancel()
        }
        source.resume()
        return source
    }
    defer { sources.forEach { $0.cancel() } }
    try await task.value
}

/// Flushes `print`'s buffer, so lines reach a pipe (tests, CI logs) promptly.
func flushStandardOutput() {
    fflush(nil)
}
