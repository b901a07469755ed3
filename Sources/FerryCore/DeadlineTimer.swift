import Dispatch

/// A one-shot timer that fires on a dispatch queue and can be cancelled.
///
/// For deadlines that are usually cancelled long before they fire (a
/// transfer's 50-minute timeout, a wait for delivery reports). `Task.sleep`
/// and `DispatchQueue.asyncAfter` keep their timer, and the memory behind it,
/// until the deadline even when cancelled: measured as about 300 bytes per
/// transfer held for the whole timeout. A cancelled dispatch source is freed
/// at once. It also fires when the cooperative pool is busy.
public final class DeadlineTimer: @unchecked Sendable {
    // A dispatch source is thread-safe; it is only resumed once and cancelled.
    private let source: DispatchSourceTimer

    private init(source: DispatchSourceTimer) { self.source = source }

    /// Runs `action` after `seconds` (clamped to 0…ten years) unless cancelled first.
    public static func start(after seconds: Double, _ action: @escaping @Sendable () -> Void) -> DeadlineTimer {
        let source = DispatchSource.makeTimerSource(queue: .global())
        let clamped = Duration.seconds(clamping: seconds).components
        source.schedule(deadline: .now() + .seconds(Int(clamped.seconds)) + .nanoseconds(Int(clamped.attoseconds / 1_000_000_000)))
        source.setEventHandler {
            source.cancel()
            action()
        }
        source.resume()
        return DeadlineTimer(source: source)
    }

    /// The action will not run (if it has not yet); the timer's memory is freed.
    public func cancel() { source.cancel() }
}
