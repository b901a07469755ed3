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

    /// Sees every state change and progress report (the admin API's view).
    private let observe: @Sendable (TransferStatus.State, TransferProgress) -> Void

    init(publisher: OutcomePublisher, template: TransferStatus, interval: Double,
         observe: @escaping @Sendable (TransferStatus.State, TransferProgress) -> Void = { _, _ in }) {
        self.publisher = publisher
        self.template = template
        self.interval = interval
        self.observe = observe
    }

    /// The latest progress, the bytes the last `paused` status gave (nil when
    /// not paused: requests the pause aborted take their bytes back, and the
    /// status then says what is kept) and when the last `running` went out.
    /// One lock for all three, held while posting: statuses go out in the
    /// order their values were decided (a pause's status and an aborted
    /// request's smaller count, decided on two threads, once went out in the
    /// reverse order, leaving `paused` with bytes no longer kept).
    private struct Shown {
        var last = TransferProgress(bytesTransferred: 0, totalBytes: nil)
        var paused: Int64?
        var lastSent: Date?
    }
    private let shown = Mutex(Shown())

    /// Publishes `paused` or `running` for a pause or resume.
    func stateChanged(_ state: TransferStatus.State) {
        shown.withLock { shown in
            shown.paused = state == .paused ? shown.last.bytesTransferred : nil
            observe(state, shown.last)
            publisher.post(status(state, shown.last, at: Date()))
        }
    }

    func report(_ progress: TransferProgress) {
        shown.withLock { shown in
            shown.last = progress
            observe(shown.paused == nil ? .running : .paused, progress)
            if let pausedAt = shown.paused {
                // Bytes of aborted requests came back: a single PUT or GET starts over on resume.
                if progress.bytesTransferred < pausedAt {
                    shown.paused = progress.bytesTransferred
                    publisher.post(status(.paused, progress, at: Date()))
                }
                return
            }
            let now = Date()
            guard shown.lastSent.map({ now.timeIntervalSince($0) >= interval }) ?? true else { return }
            shown.lastSent = now
            publisher.post(status(.running, progress, at: now))
        }
    }

    private func status(_ state: TransferStatus.State, _ progress: TransferProgress, at time: Date) -> TransferStatus {
        var status = template
        status.state = state
        status.bytesTransferred = progress.bytesTransferred
        status.totalBytes = progress.totalBytes
        status.time = Timestamp.iso8601(time)
        return status
    }
}
