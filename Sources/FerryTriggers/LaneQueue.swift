import FerryCore
import FerryTriggerKit
import DequeModule
import FerryKafka
import Synchronization

/// The messages of one partition lane, in offset order. Unlike an AsyncStream
/// it can wait with a deadline (the batching window) and hand over what is
/// already queued without waiting (filling a batch).
final class LaneQueue: Sendable {
    enum Next: Sendable {
        case message(KafkaMessage)
        case timedOut
        case finished
    }

    private struct State {
        /// A taken message leaves at once, with its bytes.
        var items = Deque<KafkaMessage>()
        var finished = false
        var waiter: (id: Int, continuation: CheckedContinuation<Next, Never>)?
        var nextWaiter = 0

        mutating func pop() -> KafkaMessage? { items.popFirst() }
    }

    private let state = Mutex(State())

    func push(_ message: KafkaMessage) {
        let waiter = state.withLock { s -> CheckedContinuation<Next, Never>? in
            if let waiter = s.waiter { s.waiter = nil; return waiter.continuation }
            s.items.append(message)
            return nil
        }
        waiter?.resume(returning: .message(message))
    }

    /// No more messages will come; a waiting reader is told so.
    func finish() {
        let waiter = state.withLock { s -> CheckedContinuation<Next, Never>? in
            s.finished = true
            defer { s.waiter = nil }
            return s.waiter?.continuation
        }
        waiter?.resume(returning: .finished)
    }

    /// Up to `max` messages already queued, without waiting.
    func take(max: Int) -> [KafkaMessage] {
        state.withLock { s in
            var out: [KafkaMessage] = []
            while out.count < max, let message = s.pop() { out.append(message) }
            return out
        }
    }

    /// The next message, waiting until `deadline` at most (nil: until one comes or the lane ends).
    func next(until deadline: ContinuousClock.Instant? = nil) async -> Next {
        await withCheckedContinuation { (continuation: CheckedContinuation<Next, Never>) in
            let waiting = state.withLock { s -> Int? in
                if let message = s.pop() { continuation.resume(returning: .message(message)); return nil }
                if s.finished { continuation.resume(returning: .finished); return nil }
                s.nextWaiter += 1
                s.waiter = (s.nextWaiter, continuation)
                return s.nextWaiter
            }
            if let id = waiting, let deadline {
                Task { [self] in
                    try? await Task.sleep(until: deadline, clock: .continuous)
                    expire(id)
                }
            }
        }
    }

    private func expire(_ id: Int) {
        let waiter = state.withLock { s -> CheckedContinuation<Next, Never>? in
            guard let waiter = s.waiter, waiter.id == id else { return nil }
            s.waiter = nil
            return waiter.continuation
        }
        waiter?.resume(returning: .timedOut)
    }
}
