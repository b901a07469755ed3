import FerryCore
import FerryEngine
import Foundation
import Synchronization

/// Turns an engine's progress callbacks into `running` statuses, at most one
/// per interval (the first is sent at once).
final class ProgressReporter: Sendable {
    private let publisher: OutcomePublisher
    private let template: TransferStatus
    private let interval: Double
    private let lastSent = Mutex<Date?>(nil)

    /// Sees every state change and progress report (the admin API's view).
    private let observe: @Sendable (TransferStatus.State, TransferProgress) -> Void

    init(publisher: OutcomePublisher, template: TransferStatus, interval: Double,
         observe: @escaping @Sendable (TransferStatus.State, TransferProgress) -> Void = { _, _ in }) {
        self.publisher = publisher
        self.template = template
        self.interval = interval
        self.observe = observe
    }

    private let last = Mutex(TransferProgress(bytesTransferred: 0, totalBytes: nil))
    /// While paused: the bytes the last `paused` status gave. Requests the pause
    /// aborted take their bytes back; the status then says what is kept.
    private let paused = Mutex<Int64?>(nil)

    /// Publishes `paused` or `running` for a pause or resume.
    func stateChanged(_ state: TransferStatus.State) {
        let progress = last.withLock { $0 }
        paused.withLock { $0 = state == .paused ? progress.bytesTransferred : nil }
        observe(state, progress)
        publisher.post(snapshot(state))
    }

    /// A status of `state` with the latest progress.
    func snapshot(_ state: TransferStatus.State) -> TransferStatus {
        let progress = last.withLock { $0 }
        var status = template
        status.state = state
        status.bytesTransferred = progress.bytesTransferred
        status.totalBytes = progress.totalBytes
        status.time = Timestamp.iso8601(Date())
        return status
    }

    func report(_ progress: TransferProgress) {
        last.withLock { $0 = progress }
        let pausedAt = paused.withLock { $0 }
        observe(pausedAt == nil ? .running : .paused, progress)
        if let pausedAt {
            // Bytes of aborted requests came back: a single PUT or GET starts over on resume.
            let dropped = paused.withLock { p -> Bool in
                guard let shown = p, progress.bytesTransferred < shown else { return false }
                p = progress.bytesTransferred
                return true
            }
            if dropped && progress.bytesTransferred < pausedAt { publisher.post(snapshot(.paused)) }
            return
        }
        let now = Date()
        let due = lastSent.withLock { last in
            guard last.map({ now.timeIntervalSince($0) >= interval }) ?? true else { return false }
            last = now
            return true
        }
        guard due else { return }
        var status = template
        status.state = .running
        status.bytesTransferred = progress.bytesTransferred
        status.totalBytes = progress.totalBytes
        status.time = Timestamp.iso8601(now)
        publisher.post(status)
    }
}
