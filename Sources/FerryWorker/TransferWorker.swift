import FerryCore
import FerryEngine
import FerryKafka
import FerryStore
import Foundation
import Logging

/// Consumes `<prefix>.requests` in the worker group and runs up to
/// `maxTransfers` requests at once. An offset is committed only when every
/// request before it in its partition has a durable outcome.
public final class TransferWorker: Sendable {
    private let consumer: KafkaConsumer
    private let controls: ControlListener
    private let pipeline: RequestPipeline
    private let tracker = OffsetTracker()
    private let slots: AsyncSemaphore
    private let logger: Logger
    /// Seconds a transfer in flight may take to finish after SIGTERM.
    private let shutdownGrace: Double

    init(configuration: WorkerConfiguration, engine: TransferEngine, state: WorkerStateStore,
         producer: KafkaProducer, identity: IdentityVerifier, logger: Logger) throws(KafkaError) {
        var kafka = configuration.kafka
        kafka["group.id"] = configuration.topics.workerGroup
        let maxTransfers = configuration.engine.maxTransfers
        consumer = try KafkaConsumer(configuration: kafka, subscribing: [configuration.topics.requests],
                                     bufferCapacity: max(8, maxTransfers * 2), logger: logger)
        slots = AsyncSemaphore(limit: maxTransfers)
        controls = try ControlListener(configuration: configuration, engine: engine, logger: logger)
        shutdownGrace = configuration.shutdownGraceSeconds
        pipeline = RequestPipeline(engine: engine, state: state,
                                   publisher: OutcomePublisher(producer: producer, topics: configuration.topics, logger: logger),
                                   events: EventBuilder(region: configuration.region),
                                   resolver: configuration.prefixResolver, identity: identity, workerId: configuration.workerId,
                                   progressInterval: configuration.progressIntervalSeconds, logger: logger)
        self.logger = logger
    }

    /// Runs until the task is cancelled; then stops fetching, commits what is finished and leaves the group.
    public func run() async {
        await withTaskCancellationHandler {
            let controlTask = Task { [controls] in await controls.run() }
            let committer = Task { [self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(100))
                    await commitFinished()
                }
            }
            await withTaskGroup(of: Void.self) { group in
                for await message in consumer {
                    tracker.begin(message)
                    await slots.acquire()
                    group.addTask { [self] in
                        defer { slots.release() }
                        if await processShielded(message) { tracker.finish(message) }
                    }
                }
                await group.waitForAll()
            }
            committer.cancel()
            controlTask.cancel()
            await commitFinished()
            consumer.close()
            logger.info("transfer worker stopped")
        } onCancel: {
            consumer.stopFetching()
        }
    }

    /// Processes `message` in a task that shutdown does not cancel at once:
    /// when the worker is asked to stop, a transfer in flight gets
    /// `shutdownGrace` seconds to finish; after that it is cancelled, left
    /// uncommitted, and redelivered to whichever worker takes the partition.
    private func processShielded(_ message: KafkaMessage) async -> Bool {
        let pipeline = self.pipeline
        let work = Task { await pipeline.process(message) }
        return await withTaskCancellationHandler {
            await work.value
        } onCancel: { [shutdownGrace, logger] in
            Task {
                try? await Task.sleep(for: .seconds(shutdownGrace))
                if !work.isCancelled {
                    logger.warning("shutdown grace of \(shutdownGrace) s over: stopping the transfer at offset \(message.offset); it will be redelivered")
                }
                work.cancel()
                pipeline.engine.control(for: message.transferId ?? "")?.cancel(FerryError(.cancelled, "worker shutting down"))
            }
        }
    }

    private func commitFinished() async {
        let offsets = tracker.takeCommittable()
        guard !offsets.isEmpty else { return }
        do {
            try await consumer.commit(offsets)
        } catch {
            tracker.commitFailed(offsets)
            logger.warning("offset commit failed (will retry): \(error)")
        }
    }
}
