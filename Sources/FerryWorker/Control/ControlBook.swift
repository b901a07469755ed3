import FerryCore
import FerryEngine
import Foundation
import Synchronization

/// The fleet's pause and cancel decisions, as every worker rebuilds them
/// from `<prefix>.control` (read from its beginning at start, then followed):
/// the latest action per transfer id, for `retention` seconds after it was
/// sent. Transfers of this worker are attached to it from the moment their
/// request is reached until they end, so a decision reaches them whether it
/// came before their request (a cancel of a queued request, a pause that
/// outlived a crash or a rebalance) or while they wait or run.
///
/// Bounded: decisions past the retention are pruned as the book grows, and at
/// most `capacity` are kept; beyond that the oldest go first (`evicted`
/// counts them). Anyone who may write the topic could otherwise grow every
/// worker's memory with each message naming a new id.
final class ControlBook: Sendable {
    struct Decision: Sendable {
        var action: ControlMessage.Action
        var at: Date
    }

    private struct State {
        var decisions: [String: Decision] = [:]
        var attached: [String: TransferControl] = [:]
        var prune = DoublingSweep(floor: ControlBook.firstPrune)
        var evicted = 0
    }
    private let state = Mutex(State())
    let retention: Double
    let capacity: Int
    static let firstPrune = 1024

    init(retention: Double, capacity: Int = 100_000) {
        self.retention = retention
        self.capacity = max(1, capacity)
    }

    /// Records a decision and applies it to the transfer if it is attached
    /// here; returns the transfer's state after it, or nil when not attached.
    @discardableResult
    func record(_ message: ControlMessage, at sent: Date, now: Date = Date()) -> TransferControl.State? {
        // The time is the producer's (Kafka's CreateTime): one from the future would never
        // expire and, never the oldest, would pin its place in a full book.
        let at = min(sent, now)
        return state.withLock { s in
            guard now.timeIntervalSince(at) < retention else { return nil }
            if let current = s.decisions[message.id], current.at > at { return s.attached[message.id]?.state }
            s.decisions[message.id] = Decision(action: message.action, at: at)
            if s.prune.isDue(s.decisions.count) || s.decisions.count > capacity { bound(&s, now: now) }
            guard let control = s.attached[message.id] else { return nil }
            // Applied under the lock, so decisions reach a transfer in the order they were made.
            Self.apply(message.action, to: control)
            return control.state
        }
    }

    /// Drops expired decisions; over `capacity`, the oldest tenth more.
    private func bound(_ s: inout State, now: Date) {
        s.decisions = s.decisions.filter { now.timeIntervalSince($0.value.at) < retention }
        if s.decisions.count > capacity {
            let keep = capacity - capacity / 10
            let oldest = s.decisions.sorted { $0.value.at < $1.value.at }.prefix(s.decisions.count - keep)
            for (id, _) in oldest { s.decisions[id] = nil }
            s.evicted += oldest.count
        }
        s.prune.swept(leaving: s.decisions.count)
    }

    /// Decisions dropped while still in force because the book was full.
    var evicted: Int { state.withLock { $0.evicted } }

    /// The decision in force for `id`, if any.
    func decision(for id: String, now: Date = Date()) -> Decision? {
        state.withLock { s in s.decisions[id].flatMap { now.timeIntervalSince($0.at) < retention ? $0 : nil } }
    }

    /// Attaches a transfer of this worker and applies the decision in force:
    /// a paused transfer starts paused, a cancelled one cancelled.
    func attach(_ id: String, _ control: TransferControl, now: Date = Date()) {
        state.withLock { s in
            s.attached[id] = control
            if let decision = s.decisions[id], now.timeIntervalSince(decision.at) < retention {
                Self.apply(decision.action, to: control)
            }
        }
    }

    func detach(_ id: String, _ control: TransferControl) {
        state.withLock { s in if s.attached[id] === control { s.attached[id] = nil } }
    }

    var count: Int { state.withLock { $0.decisions.count } }

    private static func apply(_ action: ControlMessage.Action, to control: TransferControl) {
        switch action {
        case .pause: control.pause()
        case .resume: control.resume()
        case .cancel: control.cancel(FerryError(.cancelled, "cancelled by a control message"))
        }
    }
}
