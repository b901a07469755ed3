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
    /// While paused, parts in flight still report bytes: no `running` status then.
    private let paused = Mutex(false)

    /// Publishes `paused` or `running` for a pause or resume.
    func stateChanged(_ state: TransferStatus.State) {
        paused.withLock { $0 = state == .paused }
        observe(state, last.withLock { $0 })
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
        let isPaused = paused.withLock { $0 }
        observe(isPaused ? .paused : .running, progress)
        guard !isPaused else { return }
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
