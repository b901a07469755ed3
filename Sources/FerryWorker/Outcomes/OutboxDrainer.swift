import FerryCore
import FerryKafka
import FerryStore
import Foundation
import Logging
import Metrics
import Synchronization
import FerryConcurrency

/// Publishes the outbox to Kafka: oldest first, a batch at a time, each
/// message deleted only after its delivery report. A message Kafka refuses for
/// a passing reason stays and is retried with backoff; one it refuses for good
/// (too large, invalid) never holds up the rest: a dead letter is cut smaller
/// (`DeadLetterRecord`) and tried again, anything else is parked in
/// `outbox_parked` with the reason. What is left at exit drains on restart.
/// What each round delivered raises `watermark`, which tells the offset
/// tracker when a finished request's outcome is out of the outbox and its
/// offset may go.
final class OutboxDrainer: Sendable {
    /// How long shutdown waits for the outbox to drain, whatever it holds.
    static let shutdownDrainSeconds: Double = 10
    /// How long one round waits for delivery reports before trying again.
    static let roundTimeoutSeconds: Double = 30
    /// Rows one round reads; a round that reads fewer has read everything.
    static let batchLimit = 500

    let watermark: OutboxWatermark

    private let state: WorkerStateStore
    private let producer: KafkaProducer
    private let deadLetterTopic: String
    private let deadLetterMaxBytes: Int
    private let logger: Logger
    private let health: WorkerHealth?
    private let wakeUp = Mutex<CheckedContinuation<Void, Never>?>(nil)
    private let pendingWake = Atomic<Bool>(false)

    init(state: WorkerStateStore, producer: KafkaProducer, deadLetterTopic: String,
         deadLetterMaxBytes: Int = DeadLetterRecord.defaultMaxBytes, watermark: OutboxWatermark? = nil,
         health: WorkerHealth? = nil, logger: Logger) {
        self.state = state
        self.watermark = watermark ?? OutboxWatermark(state: state)
        self.producer = producer
        self.deadLetterTopic = deadLetterTopic
        self.deadLetterMaxBytes = deadLetterMaxBytes
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
        var failedRounds = 0
        var depthReadAt = ContinuousClock.now - .seconds(1)
        while !Task.isCancelled {
            let round = await drainOnce()
            // An empty round knows the depth; otherwise it is counted (a read
            // transaction) at most once a second, not after every round.
            var depth: Int? = round == .empty ? 0 : nil
            if depth == nil && ContinuousClock.now - depthReadAt >= .seconds(1) {
                depth = try? await state.outboxDepth()
                depthReadAt = .now
            }
            if let depth { Gauge(label: "ferry_outbox_depth").record(depth) }
            health?.outbox(depth: depth, delivered: round == .progress)
            switch round {
            case .empty:
                failedRounds = 0
                await sleepUntilNudged(seconds: 1)
            case .progress:
                failedRounds = 0
            case .failed:
                failedRounds += 1
                _ = await Backoff.outboxDrain.pause(beforeRetry: failedRounds)
            }
        }
    }

    /// Drains what is there, for up to `seconds` (shutdown): no round waits past
    /// the deadline for delivery reports. Returns the depth left.
    func drain(within seconds: Double) async -> Int {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            switch await drainOnce(timeout: deadline.timeIntervalSinceNow) {
            case .empty: return 0
            case .progress: continue
            case .failed: try? await Task.sleep(for: .milliseconds(200))
            }
        }
        return (try? await state.outboxDepth()) ?? -1
    }

    enum Round { case empty, progress, failed }

    /// One round: reads the oldest rows, publishes them and settles what Kafka took.
    func drainOnce(timeout: Double = OutboxDrainer.roundTimeoutSeconds) async -> Round {
        pendingWake.store(false, ordering: .releasing)
        // Read before the batch: every row committed up to here is in the read below, or delivered.
        let committedBefore = watermark.mark()
        let batch: [(seq: Int64, message: OutboxMessage)]
        do {
            batch = try await state.pendingOutbox(limit: Self.batchLimit)
        } catch {
            logger.error("cannot read the outbox: \(error)")
            return .failed
        }
        guard !batch.isEmpty else {
            watermark.roundDelivered(rows: 0, last: nil, limit: Self.batchLimit, committedBefore: committedBefore)
            return .empty
        }
        let results = await producer.sendAll(batch.map {
            OutgoingMessage(topic: $0.message.topic, key: $0.message.key, value: $0.message.value,
                            headers: $0.message.headers.map { ($0.name, $0.value) })
        }, timeout: max(0.1, timeout))
        var delivered: [Int64] = []
        var refused: [(seq: Int64, message: OutboxMessage, error: KafkaError)] = []
        var firstError: KafkaError?
        for (entry, result) in zip(batch, results) {
            switch result {
            case .success: delivered.append(entry.seq)
            case .failure(let error) where error.isPermanentForMessage: refused.append((entry.seq, entry.message, error))
            case .failure(let error): firstError = firstError ?? error
            }
        }
        var allParked = true
        for entry in refused where !(await settleRefused(entry.seq, entry.message, entry.error)) { allParked = false }
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
        // A parked message will never be in Kafka: it no longer holds back its request's offset.
        if allParked {
            watermark.roundDelivered(rows: batch.count, last: batch.last?.seq, limit: Self.batchLimit, committedBefore: committedBefore)
        }
        return .progress
    }

    /// A message Kafka will never take as it is: a dead letter is cut to a
    /// quarter of its size (down to its headers alone) and tried again; any
    /// other message, or a dead letter with nothing left to cut, is parked.
    /// True when the message left the outbox (parked).
    private func settleRefused(_ seq: Int64, _ message: OutboxMessage, _ error: KafkaError) async -> Bool {
        do {
            if message.topic == deadLetterTopic && !message.value.isEmpty {
                let smaller = DeadLetterRecord.shrunk(message, toAtMost: min(deadLetterMaxBytes, message.recordBytes / 4))
                try await state.replaceInOutbox(seq: seq, with: smaller)
                logger.warning("outbox: dead letter refused (\(error)); cut from \(message.value.count) to \(smaller.value.count) bytes of value")
                return false
            }
            try await state.parkOutboxMessage(seq: seq, reason: "\(error)")
            Counter(label: "ferry_outbox_parked_total", dimensions: [("topic", message.topic)]).increment()
            logger.error("outbox: Kafka refused a message to \(message.topic) for good (\(error)); parked in outbox_parked so the rest can go")
            return true
        } catch {
            logger.error("outbox: cannot set aside a refused message: \(error)")
            return false
        }
    }

    private func sleepUntilNudged(seconds: Double) async {
        let timer = Task { [self] in
            try? await Task.sleep(for: .seconds(clamping: seconds))
            wakeUp.withLock { w in w?.resume(); w = nil }
        }
        // Cancellation (shutdown) wakes it too: the stop's own drain follows at once.
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = wakeUp.withLock { w -> Bool in
                    if pendingWake.load(ordering: .acquiring) || Task.isCancelled { return true }
                    w = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            wakeUp.withLock { w in w?.resume(); w = nil }
        }
        timer.cancel()
    }
}
