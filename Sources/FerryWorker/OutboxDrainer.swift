import FerryKafka
import FerryStore
import Foundation
import Logging
import Metrics
import Synchronization

/// Publishes the outbox to Kafka: oldest first, a batch at a time, each
/// message deleted only after its delivery report. A message Kafka refuses
/// stays and is retried with backoff; what is left at exit drains on restart.
final class OutboxDrainer: Sendable {
    private let state: WorkerStateStore
    private let producer: KafkaProducer
    private let logger: Logger
    private let health: WorkerHealth?
    private let wakeUp = Mutex<CheckedContinuation<Void, Never>?>(nil)
    private let pendingWake = Atomic<Bool>(false)

    init(state: WorkerStateStore, producer: KafkaProducer, health: WorkerHealth? = nil, logger: Logger) {
        self.state = state
        self.producer = producer
        self.health = health
        self.logger = logger
    }

    /// New messages are in the outbox: drain now rather than at the next tick.
    func nudge() {
        pendingWake.store(true, ordering: .releasing)
        wakeUp.withLock { w in w?.resume(); w = nil }
    }

    /// Drains until the task is cancelled.
    func run() async {
        var delay = 0.1
        while !Task.isCancelled {
            let round = await drainOnce()
            if let depth = try? await state.outboxDepth() {
                Gauge(label: "ferry_outbox_depth").record(depth)
                health?.outbox(depth: depth, delivered: round == .progress)
            }
            switch round {
            case .empty:
                delay = 0.1
                await sleepUntilNudged(seconds: 1)
            case .progress:
                delay = 0.1
            case .failed:
                try? await Task.sleep(for: .seconds(delay))
                delay = min(delay * 2, 5)
            }
        }
    }

    /// Drains what is there, for up to `seconds` (shutdown). Returns the depth left.
    func drain(within seconds: Double) async -> Int {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            switch await drainOnce() {
            case .empty: return 0
            case .progress: continue
            case .failed: try? await Task.sleep(for: .milliseconds(200))
            }
        }
        return (try? await state.outboxDepth()) ?? -1
    }

    private enum Round { case empty, progress, failed }

    private func drainOnce() async -> Round {
        pendingWake.store(false, ordering: .releasing)
        let batch: [(seq: Int64, message: OutboxMessage)]
        do {
            batch = try await state.pendingOutbox(limit: 500)
        } catch {
            logger.error("cannot read the outbox: \(error)")
            return .failed
        }
        guard !batch.isEmpty else { return .empty }
        let results = await producer.sendAll(batch.map {
            OutgoingMessage(topic: $0.message.topic, key: $0.message.key, value: $0.message.value,
                            headers: $0.message.headers.map { ($0.name, $0.value) })
        })
        var delivered: [Int64] = []
        var firstError: KafkaError?
        for (entry, result) in zip(batch, results) {
            switch result {
            case .success: delivered.append(entry.seq)
            case .failure(let error): firstError = firstError ?? error
            }
        }
        do {
            try await state.removeFromOutbox(delivered)
        } catch {
            // They were delivered; deleting them again later only republishes them (duplicates are harmless).
            logger.error("cannot remove delivered messages from the outbox: \(error)")
            return .failed
        }
        if let firstError {
            logger.warning("outbox: \(batch.count - delivered.count) of \(batch.count) messages not delivered, retrying: \(firstError)")
            return .failed
        }
        return .progress
    }

    private func sleepUntilNudged(seconds: Double) async {
        let timer = Task { [self] in
            try? await Task.sleep(for: .seconds(seconds))
            wakeUp.withLock { w in w?.resume(); w = nil }
        }
        await withCheckedContinuation { continuation in
            let resumeNow = wakeUp.withLock { w -> Bool in
                if pendingWake.load(ordering: .acquiring) { return true }
                w = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
        timer.cancel()
    }
}
