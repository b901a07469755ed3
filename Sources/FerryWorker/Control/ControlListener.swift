import FerryCore
import FerryEngine
import FerryKafka
import FerryStore
import Foundation
import Logging
import Metrics
import Synchronization
import FerryConcurrency

/// Reads `<prefix>.control` from its beginning (every worker reads all of it,
/// in no group) into the `ControlBook`, then follows it. A decision reaches
/// the transfer it names when it runs here, and any request of that id this
/// worker reaches later; one for an id that already finished here is logged
/// and has no effect. `caughtUp()` returns once the past has been read, so a
/// worker applies old decisions before it takes its first request.
final class ControlListener: Sendable {
    private let consumer: KafkaConsumer
    private let ends: [Int32: Int64]
    private let book: ControlBook
    private let state: WorkerStateStore
    private let logger: Logger
    private let replayed = OnceValue<Void>()

    /// The longest a worker waits for the control topic's past before it starts anyway.
    static let catchUpSeconds: Double = 30

    init(configuration: WorkerConfiguration, book: ControlBook, state: WorkerStateStore, logger: Logger) async throws(KafkaError) {
        (consumer, ends) = try await KafkaConsumer.replaying(topic: configuration.topics.control,
                                                             configuration: configuration.kafka.forQuietTopic(), logger: logger)
        self.book = book
        self.state = state
        self.logger = logger
        if ends.values.allSatisfy({ $0 <= 0 }) { replayed.deliver(()) }
    }

    /// Returns when the decisions sent before this worker started are in the
    /// book (or after `catchUpSeconds`, with a warning).
    func caughtUp() async {
        let timer = DeadlineTimer.start(after: Self.catchUpSeconds) { [replayed, logger] in
            if replayed.deliver(()) { logger.warning("the control topic's past was not read within \(Int(Self.catchUpSeconds)) s; taking requests anyway") }
        }
        await replayed.value
        timer.cancel()
    }

    func run() async {
        var remaining = ends.filter { $0.value > 0 }
        await withTaskCancellationHandler {
            for await message in consumer {
                let live = remaining.isEmpty
                await apply(message, live: live)
                if let end = remaining[message.partition], message.offset >= end - 1 {
                    remaining[message.partition] = nil
                    if remaining.isEmpty {
                        replayed.deliver(())
                        logger.info("control decisions read: \(book.count) in force")
                    }
                }
            }
            await consumer.close()
        } onCancel: {
            consumer.stopFetching()
        }
    }

    func apply(_ message: KafkaMessage, live: Bool) async {
        // A name given twice could steer one transfer for whoever checked the other.
        if let problem = StrictJSON.check(message.value) {
            logger.warning("ignoring control message: \(problem)",
                           metadata: ["partition": "\(message.partition)", "offset": "\(message.offset)"])
            return
        }
        guard let command = try? JSONDecoder().decode(ControlMessage.self, from: Data(message.value)) else {
            logger.warning("ignoring undecodable control message",
                           metadata: ["partition": "\(message.partition)", "offset": "\(message.offset)"])
            return
        }
        // An id no request can carry names no transfer; kept, it would only take memory.
        if let problem = RequestDecoder.idProblem(command.id) {
            logger.warning("ignoring control message: \(TextClip.clipped(problem.message, toUTF8: 300))",
                           metadata: ["partition": "\(message.partition)", "offset": "\(message.offset)"])
            return
        }
        let sent = message.queuedAt ?? Date()
        let evictedBefore = book.evicted
        let after = book.record(command, at: sent)
        if case let evicted = book.evicted - evictedBefore, evicted > 0 {
            Counter(label: "ferry_control_decisions_evicted_total").increment(by: evicted)
            logger.warning("""
                control decisions: the book holds at most \(book.capacity); dropped the \(evicted) oldest still in force \
                (a transfer they named and that has not started runs without its pause or cancel)
                """)
        }
        guard live else { return }
        if let after {
            logger.info("control \(command.action.rawValue) applied (now \(after.rawValue))", metadata: ["transfer": "\(command.id)"])
        } else if let finished = try? await state.finishedStatus(id: command.id) {
            logger.info("control \(command.action.rawValue) for \(command.id): already finished here (\(finished.state.rawValue)); no effect")
        } else {
            logger.info("control \(command.action.rawValue) for \(command.id): not running on this worker; remembered for when its request is reached")
        }
    }
}
