import Synchronization

/// First come, first served per key: a turn taken (synchronously, in the
/// order messages are read) waits until every earlier turn of its key has
/// finished. One item's requests thus run one at a time and in offset order,
/// and one transfer id's messages one at a time, while others run side by side.
final class KeyedTurns: Sendable {
    private struct Queue {
        var running = false
        var waiting: [(id: Int, continuation: CheckedContinuation<Void, Never>?)] = []
    }
    private struct State {
        var queues: [String: Queue] = [:]
        var nextId = 0
    }
    private let state = Mutex(State())

    final class Turn: Sendable {
        fileprivate let key: String
        fileprivate let id: Int
        fileprivate let owner: KeyedTurns
        private let finished = Atomic<Bool>(false)
        fileprivate init(key: String, id: Int, owner: KeyedTurns) { self.key = key; self.id = id; self.owner = owner }

        /// Returns when all earlier turns of the key have finished.
        func wait() async { await owner.wait(self) }
        /// Whether `wait()` will have to wait: an earlier turn of the key is
        /// outstanding. Once false it stays false (only the first turn runs).
        var mustWait: Bool { owner.mustWait(self) }
        /// Lets the next turn of the key go; idempotent.
        func finish() {
            guard !finished.exchange(true, ordering: .acquiringAndReleasing) else { return }
            owner.finish(self)
        }
    }

    /// Takes the next turn of `key`.
    func take(_ key: String) -> Turn {
        let id = state.withLock { s -> Int in
            s.nextId += 1
            s.queues[key, default: Queue()].waiting.append((s.nextId, nil))
            return s.nextId
        }
        return Turn(key: key, id: id, owner: self)
    }

    /// Number of keys with turns outstanding (for tests).
    var keysInUse: Int { state.withLock { $0.queues.count } }

    private func mustWait(_ turn: Turn) -> Bool {
        state.withLock { s in
            guard let queue = s.queues[turn.key], let index = queue.waiting.firstIndex(where: { $0.id == turn.id }) else { return false }
            return index != 0  // the head runs, or goes as soon as it asks
        }
    }

    private func wait(_ turn: Turn) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let go = state.withLock { s -> Bool in
                guard var queue = s.queues[turn.key], let index = queue.waiting.firstIndex(where: { $0.id == turn.id }) else { return true }
                if index == 0 && !queue.running {
                    queue.running = true
                    s.queues[turn.key] = queue
                    return true
                }
                queue.waiting[index].continuation = continuation
                s.queues[turn.key] = queue
                return false
            }
            if go { continuation.resume() }
        }
    }

    private func finish(_ turn: Turn) {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard var queue = s.queues[turn.key], let index = queue.waiting.firstIndex(where: { $0.id == turn.id }) else { return nil }
            let wasHead = index == 0
            queue.waiting.remove(at: index)
            if wasHead { queue.running = false }
            guard let head = queue.waiting.first else {
                s.queues[turn.key] = nil
                return nil
            }
            // The new head goes now if it is already waiting; otherwise when it calls wait().
            if wasHead, let continuation = head.continuation {
                queue.running = true
                queue.waiting[0].continuation = nil
                s.queues[turn.key] = queue
                return continuation
            }
            s.queues[turn.key] = queue
            return nil
        }
        next?.resume()
    }
}
