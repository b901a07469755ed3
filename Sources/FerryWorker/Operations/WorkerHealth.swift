import Foundation
import Synchronization

/// What `/readyz` reports: the consumer has joined its group, storage answers,
/// the outbox drains. Each part is set by the component that knows it.
public final class WorkerHealth: Sendable {
    private struct State {
        var joinedGroup = false
        var storageReachable: Bool?
        var storageError: String?
        var outboxDepth = 0
        var lastDrain = Date()
    }
    private let state = Mutex(State())
    /// An outbox with messages that has not delivered any for this long is stuck.
    let outboxStallSeconds: Double
    /// False for a process that runs no transfer worker (nothing to join, no outbox).
    let transfers: Bool

    public init(transfers: Bool = true, outboxStallSeconds: Double = 30) {
        self.transfers = transfers
        self.outboxStallSeconds = outboxStallSeconds
    }

    func joinedGroup() { state.withLock { $0.joinedGroup = true } }
    func storage(reachable: Bool, error: String? = nil) {
        state.withLock { $0.storageReachable = reachable; $0.storageError = error }
    }
    /// After a drain round: `depth` when it was read (nil: as before), and whether the round delivered.
    func outbox(depth: Int?, delivered: Bool) {
        state.withLock { s in
            if let depth { s.outboxDepth = depth }
            if delivered || s.outboxDepth == 0 { s.lastDrain = Date() }
        }
    }

    public struct Report: Codable, Sendable {
        public var ready: Bool
        public var checks: [String: String]
    }

    public func report(now: Date = Date()) -> Report {
        state.withLock { s in
            var checks: [String: String] = [:]
            var ready = true
            if transfers {
                checks["kafka"] = s.joinedGroup ? "ok: partitions assigned" : "waiting: not yet in the consumer group"
                ready = ready && s.joinedGroup
                let stalled = s.outboxDepth > 0 && now.timeIntervalSince(s.lastDrain) > outboxStallSeconds
                checks["outbox"] = stalled ? "stalled: \(s.outboxDepth) messages, none delivered for \(now.timeIntervalSince(s.lastDrain).clampedInt()) s"
                                           : "ok: \(s.outboxDepth) waiting"
                ready = ready && !stalled
            }
            switch s.storageReachable {
            case .some(true): checks["storage"] = "ok"
            case .some(false): checks["storage"] = "unreachable: \(s.storageError ?? "")"; ready = false
            case .none: checks["storage"] = "not checked yet"; ready = false
            }
            return Report(ready: ready, checks: checks)
        }
    }
}
