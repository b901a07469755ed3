import FerryCore
import FerryEngine
import FerryKafka
import FerryS3
import FerryLocalStore
import FerryStorage
import FerryStore
import FerryTables
import FerryTriggerKit
import FerryTriggers
import Foundation
import Logging
import Metrics
import Synchronization
import FerryConcurrency

/// Consumes `<prefix>.requests` in the worker group and runs up to
/// `maxTransfers` requests at once. An offset is committed only when every
/// request before it in its partition has its outcome in Kafka: written to
/// the outbox, then delivered by the drainer. Partitions revoked in a rebalance get
/// `rebalanceGrace` for their transfers to finish; the rest are handed off
/// (their multipart uploads kept) to the partition's next owner.
public final class TransferWorker: Sendable {
    private let consumer: KafkaConsumer
    private let controls: ControlListener
    private let callbacks: CallbackDispatcher
    private let pipeline: RequestPipeline
    /// Item requests keyed `tables/…` take a turn per key as they are read: one item's writes run in offset order.
    private let messageTurns = KeyedTurns()
    private let follower: TableFollower?
    private let releaser: FileReleaser
    private let tracker: OffsetTracker
    private let committer: OffsetCommitter
    private let breaker: CrashLoopBreaker
    private let gate = IsolationGate.process
    private let slots: AsyncSemaphore
    /// Requests a worker holds at once per transfer slot: running, waiting or paused.
    public static let messagesPerTransferSlot = 4
    /// How long a rebalance waits for the outbox to deliver the outcomes of the
    /// revoked partitions' finished requests, so their offsets can be committed.
    static let deliveryWaitSeconds: Double = 5
    private let drainer: OutboxDrainer
    private let state: WorkerStateStore
    private let sweeper: UploadSweeper
    private let configuration: WorkerConfiguration
    private let storage: StorageGate
    private let engine: TransferEngine
    private let logger: Logger

    init(configuration: WorkerConfiguration, engine: TransferEngine, state: WorkerStateStore, producer: KafkaProducer,
         identity: IdentityVerifier, inFlight: InFlightTransfers, health: WorkerHealth, logger: Logger) async throws(KafkaError) {
        var kafka = configuration.kafka
        kafka["group.id"] = configuration.topics.workerGroup
        let maxTransfers = configuration.engine.maxTransfers
        let watermark = OutboxWatermark(state: state)
        let tracker = OffsetTracker(watermark: watermark)
        let grace = configuration.rebalanceGraceSeconds
        let storage = StorageGate(health: health, logger: logger) { [store = engine.store] () async throws(FerryError) in
            try await store.probe()
        }
        // Set once the breaker exists; the rebalance callback only runs after the consumer polls.
        let forget = ForgetStarts()
        let rebalance = RebalanceHandler(
            assigned: { tracker.assign($0); health.joinedGroup() },
            revoked: { partitions in
                forget.callAsFunction(Set(partitions))
                return Self.release(partitions, tracker: tracker, watermark: watermark, engine: engine, storage: storage,
                                    grace: grace, logger: logger)
            })
        // The buffer holds rounds of work; beyond it (or beyond 32 MiB) the consumer
        // pauses its partitions but keeps polling, so slow transfers never push it
        // past max.poll.interval.ms. Each pause drops librdkafka's prefetched
        // messages and each resume refetches them, from whichever partitions answer
        // first: a buffer of 2 rounds kept 4.6 of 32 transfers busy, and one of 8
        // rounds drained a backlog's partitions one after another, ending at half
        // speed on the last few (S6: 627 → 361 requests/s). 32 rounds: flat.
        consumer = try KafkaConsumer(configuration: kafka, subscribing: [configuration.topics.requests],
                                     bufferCapacity: max(64, maxTransfers * 32), rebalance: rebalance, logger: logger)
        self.tracker = tracker
        committer = OffsetCommitter(consumer: consumer, tracker: tracker, logger: logger)
        breaker = CrashLoopBreaker(maxStarts: configuration.maxStarts, tracker: tracker, committer: committer,
                                   consumer: consumer, state: state, logger: logger)
        forget.install(breaker)
        // Messages in process: the transfers that run (the engine's --max-transfers
        // slots), and as many again three times over that wait for a slot or are
        // paused, which hold no transfer slot.
        slots = AsyncSemaphore(limit: maxTransfers * Self.messagesPerTransferSlot)
        callbacks = try CallbackDispatcher(configuration: configuration, producer: producer, logger: logger)
        let book = ControlBook(retention: configuration.finishedRetentionSeconds)
        controls = try await ControlListener(configuration: configuration, book: book, state: state, logger: logger)
        var publisher = OutcomePublisher(producer: producer, topics: configuration.topics, logger: logger)
        publisher.deadLetterMaxBytes = DeadLetterRecord.maxBytes(producerProperties: configuration.kafka.properties)
        drainer = OutboxDrainer(state: state, producer: producer, deadLetterTopic: configuration.topics.requestsDLQ,
                                deadLetterMaxBytes: publisher.deadLetterMaxBytes, watermark: watermark, health: health, logger: logger)
        let events = EventBuilder(region: configuration.region)
        self.storage = storage
        let streams = StreamRecordBuilder(region: configuration.region, topics: configuration.topics)
        var pipeline = RequestPipeline(engine: engine, state: state, outbox: drainer,
                                       publisher: publisher, events: events, streams: streams,
                                       policy: configuration.accessPolicy, identity: identity, controls: book,
                                       callbacks: configuration.callbacks, workerId: configuration.workerId,
                                       progressInterval: configuration.progressIntervalSeconds, inFlight: inFlight,
                                       storage: storage, logger: logger)
        follower = configuration.tables.isEmpty ? nil
            : try TableFollower(tables: configuration.tables.map(\.name), topics: configuration.topics, kafka: configuration.kafka,
                                view: state, logger: logger)
        pipeline.tables = ItemTables(definitions: configuration.tables, follower: follower)
        pipeline.dataRootLayout = configuration.dataRootLayout
        pipeline.owns = { [tracker] in tracker.owns($0) }
        self.pipeline = pipeline
        releaser = FileReleaser(state: state, engine: engine, publisher: publisher, events: events, streams: streams,
                                outbox: drainer, logger: logger)
        sweeper = UploadSweeper(state: state, store: engine.store, inUse: engine.uploadsInUse,
                                age: configuration.sweepAfterSeconds, logger: logger)
        self.state = state
        self.configuration = configuration
        self.engine = engine
        self.logger = logger
    }

    /// Runs until the task is cancelled; then stops fetching, lets transfers
    /// in flight finish within the shutdown grace (hands off the rest), drains
    /// the outbox, commits what is finished and leaves the group.
    public func run() async {
        let stopping = ShutdownSteps()
        // Before a suspect of any kind runs alone, this worker's start records in Kafka are brought up to date.
        let settler = gate.addSettler { [committer] in _ = await committer.commitStart(waitingAtMost: CrashLoopBreaker.kafkaWait) }
        defer { gate.removeSettler(settler) }
        await withTaskCancellationHandler {
            await reportLeftovers()
            let controlTask = Task { [controls] in await controls.run() }
            // Pauses and cancels sent before this worker started apply to the first requests it takes.
            await controls.caughtUp()
            let drainTask = Task { [drainer] in await drainer.run() }
            let callbackTask = Task { [callbacks] in await callbacks.run() }
            let maintenance = Task { [self] in await maintain() }
            let tableTask = Task { [follower, releaser] in
                await withDiscardingTaskGroup { group in
                    if let follower { group.addTask { await follower.run() } }
                    group.addTask { await releaser.run() }
                }
            }
            let periodicCommits = Task { [committer] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(100))
                    _ = await committer.commit()
                }
            }
            // Discarding: a finished request's task is freed at once (a plain task
            // group keeps every finished child until it is awaited, here at shutdown).
            await withDiscardingTaskGroup { group in
                for await message in consumer {
                    guard tracker.begin(message) else { continue }
                    let turn = Self.itemKey(of: message).map { messageTurns.take($0) }
                    await slots.acquire()
                    // The partition may have been revoked while this message waited for a slot.
                    guard tracker.owns(message) else {
                        slots.release()
                        turn?.finish()
                        tracker.abandon(message)
                        continue
                    }
                    group.addTask { [self] in
                        defer { slots.release(); turn?.finish() }
                        // Before the breaker's gate: a turn never waits while holding it.
                        await turn?.wait()
                        await handle(message)
                    }
                }
            }
            stopping.ended("transfers in flight")
            periodicCommits.cancel()
            tableTask.cancel()
            controlTask.cancel()
            callbackTask.cancel()
            maintenance.cancel()
            drainTask.cancel()
            await drainTask.value
            stopping.ended("outbox drainer")
            // A fresh task: this one is cancelled, and SQLite reads refuse to run in a cancelled task.
            let left = await Task { [drainer] in
                await drainer.drain(within: OutboxDrainer.shutdownDrainSeconds)
            }.value
            if left != 0 { logger.warning("\(left) outbox messages not yet in Kafka; they are published when this worker starts again") }
            stopping.ended("outbox drain")
            _ = await committer.commit()
            stopping.ended("offset commit")
            await consumer.close()
            stopping.ended("consumer close")
            // Each step has a bound of its own; one near it shows here (and a stop past
            // WorkerConfiguration.shutdownBoundSeconds ends in exit, with a warning).
            logger.log(level: stopping.isSlow ? .warning : .info, "transfer worker stopped in \(stopping.summary)")
        } onCancel: {
            stopping.begin()
            consumer.stopFetching()
        }
    }

    /// The Kafka key of an item request (`tables/<table>/<item key>`), which orders one item's writes.
    private static func itemKey(of message: KafkaMessage) -> String? {
        guard let key = message.key, key.starts(with: Array("tables/".utf8)) else { return nil }
        return String(decoding: key, as: UTF8.self)
    }

    /// Runs one message through the crash-loop breaker: a suspect (started
    /// before, without an outcome) alone, a poison message into the DLQ (also
    /// alone), anything else side by side with the rest. Its start is recorded
    /// only once it holds the gate, and its record is settled (an outcome, or
    /// given back) before it leaves the gate: the next suspect's start is
    /// committed with the partition's records as they stand, and a neighbour
    /// that finished must not be counted there as started once more.
    private func handle(_ message: KafkaMessage) async {
        let admission = await breaker.assess(message)
        if admission == .notOwned { return await settle(message, durable: false) }
        if admission == .deadLetteredAlready { return await settle(message, durable: true) }
        let alone = admission != .run(isolated: false)
        await gate.enter(exclusive: alone)
        defer { gate.leave(exclusive: alone) }
        if alone { await gate.settleAll() }
        // A suspect may have waited long for the gate: is the partition still ours?
        guard tracker.owns(message), await breaker.recordStart(message) else { return await settle(message, durable: false) }
        let durable: Bool
        switch admission {
        case .quarantine(let starts, let withheld):
            Counter(label: "ferry_poison_messages_total").increment()
            await TestTrap.deadLetterHold.hold("dead letter", of: message) { !tracker.owns(message) }
            durable = await pipeline.quarantine(message, starts: starts, withheld: withheld)
            if durable { breaker.deadLettered(message) }
        case .run, .notOwned, .deadLetteredAlready:
            tracker.label(message, transferId: RequestDecoder.idHint(message.value))
            durable = await processShielded(message)
        }
        await settle(message, durable: durable)
    }

    /// A message whose outcome is durable (in the outbox) is committable once
    /// the outbox delivered up to its mark (every outbox write nudged the
    /// drainer already); one without is given back, and its start record goes.
    private func settle(_ message: KafkaMessage, durable: Bool) async {
        await TestTrap.beforeSettling()
        if durable {
            tracker.finish(message)
        } else {
            tracker.abandon(message)
            await breaker.released(message)
        }
    }

    /// Processes `message` in a task that shutdown does not cancel at once:
    /// when the worker is asked to stop, a transfer in flight gets
    /// `shutdownGrace` seconds to finish; after that it is handed off, left
    /// uncommitted, and resumed by whichever worker takes the partition. While
    /// the store is down a transfer cannot finish (but for a download's last
    /// local checks): then it is handed off at once, with what it stored kept.
    private func processShielded(_ message: KafkaMessage) async -> Bool {
        let pipeline = self.pipeline
        let finished = Finished()
        let work = Task {
            defer { finished.value.store(true, ordering: .releasing) }
            return await pipeline.process(message)
        }
        return await withTaskCancellationHandler {
            await work.value
        } onCancel: { [grace = configuration.shutdownGraceSeconds, storage, logger] in
            Task {
                let end = ContinuousClock.now.advanced(by: .seconds(clamping: grace))
                func over() -> Bool { finished.value.load(ordering: .acquiring) || !storage.isReachable || ContinuousClock.now >= end }
                while !over() { try? await Task.sleep(for: min(.milliseconds(250), ContinuousClock.now.duration(to: end))) }
                guard !finished.value.load(ordering: .acquiring) else { return }
                logger.warning(storage.isReachable
                    ? "shutdown grace of \(grace) s over: handing off the transfer at offset \(message.offset); it resumes on redelivery"
                    : "storage unreachable at shutdown: handing off the transfer at offset \(message.offset) at once; it resumes on redelivery")
                pipeline.engine.control(for: RequestDecoder.idHint(message.value) ?? "")?.handOff("worker shutting down")
                work.cancel()
            }
        }
    }

    /// Set when a shielded message's processing has ended.
    private final class Finished: Sendable { let value = Atomic<Bool>(false) }

    /// Called inside a rebalance, on the consumer's thread, for partitions
    /// about to go: no new work starts on them; transfers in flight get
    /// `grace` seconds (none while the store is unreachable, as at shutdown),
    /// then are handed off; the outbox gets a few seconds to
    /// deliver the outcomes of what finished; the delivered prefix is committed.
    private static func release(_ partitions: [TopicPartition], tracker: OffsetTracker, watermark: OutboxWatermark,
                                engine: TransferEngine, storage: StorageGate, grace: Double, logger: Logger) -> [TopicPartitionOffset] {
        let set = Set(partitions)
        tracker.stopStarting(set)
        let inFlight = tracker.inFlightCount(on: set)
        if inFlight > 0 {
            if storage.isReachable {
                logger.info("rebalance: \(inFlight) transfers in flight on revoked partitions; waiting up to \(grace) s")
            } else {
                logger.info("rebalance: \(inFlight) transfers in flight on revoked partitions; storage unreachable, so none waits")
            }
            let deadline = Date().addingTimeInterval(grace)
            while tracker.inFlightCount(on: set) > 0 && Date() < deadline && storage.isReachable { usleep(50_000) }
            let left = tracker.transfersInFlight(on: set)
            for id in left { engine.control(for: id)?.handOff("partition revoked") }
            if !left.isEmpty { logger.info("rebalance: handed off \(left.count) transfers; their next owner resumes them") }
            // Handed-off transfers stop at once (their requests are aborted); wait for them briefly.
            let stopBy = Date().addingTimeInterval(5)
            while tracker.inFlightCount(on: set) > 0 && Date() < stopBy { usleep(20_000) }
        }
        // Anything still undelivered after the wait is redone by the next owner (at least once).
        if let mark = tracker.deliveryMark(on: set), !watermark.waitBlocking(for: mark, seconds: deliveryWaitSeconds) {
            logger.info("rebalance: outcomes of finished requests not yet in Kafka after \(deliveryWaitSeconds) s; their offsets stay uncommitted")
        }
        return tracker.revoke(set)
    }

    /// At start: say what a previous run of this worker left (the outbox
    /// drains it; journaled transfers resume when their requests come back).
    private func reportLeftovers() async {
        let depth = (try? await state.outboxDepth()) ?? 0
        let journaled = (try? await state.transfersInFlight()) ?? []
        if depth > 0 || !journaled.isEmpty {
            logger.info("state from a previous run: \(depth) outbox messages to publish, \(journaled.count) journaled transfers to resume",
                        metadata: ["transfers": "\(journaled.map(\.id).prefix(20).joined(separator: ","))"])
        }
    }

    /// Every few seconds: consumer lag, the assignment and storage reachability (metrics and
    /// /readyz); every 15 s: sweep multipart uploads nobody will finish; less
    /// often: forget old finished ids, and reclaim a local store's writes cut by a crash.
    private func maintain() async {
        let sweepInterval = max(1, min(configuration.sweepAfterSeconds / 2, 3600))
        let observer = Task { [self] in
            var lagging: Set<TopicPartition> = []
            var lostReported: [TopicPartition: Int64] = [:]
            var assignment = AssignmentMetrics(group: configuration.topics.workerGroup)
            while !Task.isCancelled {
                assignment.sample(consumer)
                // Requests the broker deleted before the group read them (the consumer logs each range as an error).
                for (partition, lost) in consumer.messagesLostByPartition where lost > lostReported[partition, default: 0] {
                    Counter(label: "ferry_requests_lost_total", dimensions: [("topic", partition.topic), ("partition", "\(partition.partition)")])
                        .increment(by: lost - lostReported[partition, default: 0])
                    lostReported[partition] = lost
                }
                let lags = consumer.lag()
                for (partition, lag) in lags {
                    Gauge(label: "ferry_consumer_lag", dimensions: [("topic", partition.topic), ("partition", "\(partition.partition)")]).record(lag)
                }
                // Partitions no longer assigned report no lag here.
                for gone in lagging.subtracting(lags.map(\.0)) {
                    Gauge(label: "ferry_consumer_lag", dimensions: [("topic", gone.topic), ("partition", "\(gone.partition)")]).record(0)
                }
                lagging = Set(lags.map(\.0))
                try? await Task.sleep(for: .seconds(5))
            }
            assignment.stopped()
        }
        defer { observer.cancel() }
        // Often while the store is down, so waiting transfers resume soon after it answers.
        let prober = Task { [storage] in
            while !Task.isCancelled {
                await storage.check()
                try? await Task.sleep(for: storage.probeInterval)
            }
        }
        defer { prober.cancel() }
        // Uploads of finished transfers are swept within seconds; pruning runs less often.
        var nextPrune = Date()
        while !Task.isCancelled {
            if Date() >= nextPrune {
                nextPrune = Date().addingTimeInterval(sweepInterval)
                do {
                    // Each forgotten transfer leaves its `transfers` item: a REMOVE record, as a TTL deletion.
                    let streams = StreamRecordBuilder(region: configuration.region, topics: configuration.topics)
                    let pruned = try await state.pruneFinished(olderThan: configuration.finishedRetentionSeconds) { status, offset in
                        streams.message(streams.transferRecord(status, previous: nil, offset: offset, step: 0, expired: true))
                    }
                    if pruned > 0 { logger.info("forgot \(pruned) finished transfer ids older than the retention") }
                    try await state.pruneStarts(olderThan: configuration.finishedRetentionSeconds)
                } catch {
                    logger.warning("cannot prune finished transfer ids: \(error)")
                }
                if let local = engine.store as? LocalObjectStore { await reclaim(local) }
            }
            await sweeper.sweep()
            try? await Task.sleep(for: .seconds(clamping: min(15, sweepInterval)))
        }
    }

    /// Removes what a crashed write left in a local store (this worker's or
    /// another's sharing the directory), and says so.
    private func reclaim(_ store: LocalObjectStore) async {
        do {
            // Idle multipart uploads go after --sweep-after, as the sweeper's own do (a local store has no lifecycle rule).
            let inUse = engine.uploadsInUse
            let found = try await store.reclaimAbandonedWrites(idleUploadsAfter: configuration.sweepAfterSeconds,
                                                               inUse: { inUse.contains($0) })
            if found.blobs > 0 || found.tempEntries > 0 || found.uploads > 0 {
                logger.info("local store: removed what interrupted writes left",
                            metadata: ["blobs": "\(found.blobs)", "bytes": "\(found.bytes)", "tempIndexEntries": "\(found.tempEntries)",
                                       "uploads": "\(found.uploads)"])
                for (kind, count) in [("blobs", Int64(found.blobs)), ("bytes", found.bytes), ("temp_index_entries", Int64(found.tempEntries)),
                                      ("uploads", Int64(found.uploads))] {
                    Counter(label: "ferry_local_store_reclaimed_total", dimensions: [("kind", kind)]).increment(by: count)
                }
            }
            for reason in found.skipped {
                logger.warning("local store: left a bucket's unnamed blobs alone: \(reason)")
            }
        } catch {
            logger.warning("local store: cannot reclaim interrupted writes: \(error)")
        }
    }
}

/// Lets the rebalance callback, made before the breaker, reach it.
private final class ForgetStarts: Sendable {
    private let breaker = Mutex<CrashLoopBreaker?>(nil)
    func install(_ b: CrashLoopBreaker) { breaker.withLock { $0 = b } }
    func callAsFunction(_ partitions: Set<TopicPartition>) { breaker.withLock { $0 }?.forget(partitions) }
}
