import FerryCore
import Synchronization
import FerryConcurrency

/// A transfer's timeout, counted on the time it is not paused: the timer
/// stops when the transfer is paused and starts again, with what is left, on
/// resume (TransferUtility's timeout measures work, not waiting).
final class RunningTimeDeadline: Sendable {
    private struct State {
        var remaining: Double
        var timer: DeadlineTimer?
        var runningSince: ContinuousClock.Instant?
        var ended = false
    }
    private let state: Mutex<State>
    private let control: TransferControl
    private let fire: @Sendable () -> Void
    private let observer = Mutex<UInt64?>(nil)

    private init(seconds: Double, control: TransferControl, fire: @escaping @Sendable () -> Void) {
        state = Mutex(State(remaining: seconds))
        self.control = control
        self.fire = fire
    }

    /// Starts counting now, unless the transfer is paused (then on resume).
    static func start(seconds: Double, control: TransferControl, fire: @escaping @Sendable () -> Void) -> RunningTimeDeadline {
        let deadline = RunningTimeDeadline(seconds: seconds, control: control, fire: fire)
        let id = control.addObserver { [weak deadline] state in deadline?.changed(state) }
        deadline.observer.withLock { $0 = id }
        deadline.changed(control.state)
        return deadline
    }

    /// The transfer ended: the timer is dropped.
    func cancel() {
        let timer = state.withLock { s -> DeadlineTimer? in
            s.ended = true
            defer { s.timer = nil }
            return s.timer
        }
        timer?.cancel()
        if let id = observer.withLock({ $0 }) { control.removeObserver(id) }
    }

    private func changed(_ controlState: TransferControl.State) {
        let (stop, start): (DeadlineTimer?, Double?) = state.withLock { s in
            guard !s.ended else { return (nil, nil) }
            switch controlState {
            case .running:
                guard s.timer == nil else { return (nil, nil) }
                s.runningSince = .now
                return (nil, s.remaining)
            case .paused, .cancelled:
                if let since = s.runningSince {
                    let elapsed = since.duration(to: .now)
                    s.remaining -= elapsed.inSeconds
                    s.runningSince = nil
                }
                defer { s.timer = nil }
                return (s.timer, nil)
            }
        }
        stop?.cancel()
        if let seconds = start {
            let timer = DeadlineTimer.start(after: max(0, seconds)) { [fire] in fire() }
            let stale = state.withLock { s -> Bool in
                guard !s.ended, s.timer == nil, s.runningSince != nil else { return true }
                s.timer = timer
                return false
            }
            if stale { timer.cancel() }
        }
    }
}
