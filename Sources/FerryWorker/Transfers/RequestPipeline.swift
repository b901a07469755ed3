import FerryCore
import FerryEngine
import FerryKafka
import FerryS3
import FerryStorage
import FerryStore
import Foundation
import Logging
import Metrics
import FerryConcurrency

/// What happens to one message of `<prefix>.requests`: decode and validate
/// (or dead-letter), answer duplicates from the finished set, journal and run
/// the transfer, then record its event and terminal status in the outbox.
/// `process` returns true once the outcome is durable in the outbox, i.e. the
/// message's offset may be committed; false leaves it for redelivery.
struct RequestPipeline: Sendable {
    let engine: TransferEngine
    let state: WorkerStateStore
    let outbox: OutboxDrainer
    let publisher: OutcomePublisher
    let events: EventBuilder
    let streams: StreamRecordBuilder
    let policy: AccessPolicy
    let identity: IdentityVerifier
    /// Pause and cancel decisions of the fleet, applied from the moment a request is reached.
    let controls: ControlBook
    /// Whether a request's https callback may be accepted.
    let callbacks: CallbackSettings
    let workerId: String
    let progressInterval: Double
    let inFlight: InFlightTransfers
    /// Whether the store answers: transfers wait through its outages.
    let storage: StorageGate
    /// Declared record tables (item requests).
    var tables: ItemTables = .none
    /// How the data root is shared: by access level, a request's local files
    /// must lie in its caller's areas.
    var dataRootLayout: DataRootLayout = .shared
    /// One transfer per id at a time: a request sent twice (a producer's retry)
    /// arrives as two messages, which this worker would otherwise run side by side.
    var turnsById = KeyedTurns()
    /// Whether the message's partition is still this worker's (checked after a wait).
    var owns: @Sendable (KafkaMessage) -> Bool = { _ in true }
    let logger: Logger

    func process(_ message: KafkaMessage) async -> Bool {
        var log = logger
        log[metadataKey: "partition"] = "\(message.partition)"
        log[metadataKey: "offset"] = "\(message.offset)"
        let watchdog = CheckWatchdog("\(message.topic)/\(message.partition)/\(message.offset)", logger: log)
        defer { watchdog.disarm() }
        TestTrap.check(message.value)
        switch RequestDecoder.decodeAny(message.value) {
        case .failure(let failure):
            watchdog.disarm()
            return await reject(message, error: failure.error, id: failure.id, op: failure.op, log: log)
        case .success(.transfer(let request)):
            log[metadataKey: "transfer"] = "\(request.id)"
            return await run(request, message: message, watchdog: watchdog, log: log)
        case .success(.item(let request)):
            log[metadataKey: "transfer"] = "\(request.id)"
            return await runItem(request, message: message, watchdog: watchdog, log: log)
        }
    }

    /// The parts of the data root `caller` may use; nil when it is shared.
    func localAreas(of caller: Caller) -> LocalAreas? {
        dataRootLayout == .accessLevels ? LocalAreas(caller: caller, permissions: policy.permissions) : nil
    }

    /// A request whose id already finished is answered from the finished set
    /// (true); nil: it has not finished, run it; false: the state cannot be read.
    func answerIfFinished(_ id: String, message: KafkaMessage, watchdog: CheckWatchdog, log: Logger) async -> Bool? {
        do {
            guard let finished = try await state.finishedStatus(id: id) else { return nil }
            watchdog.disarm()
            log.info("duplicate request: \(id) already finished (\(finished.state.rawValue)); answering from the finished set")
            Counter(label: "ferry_duplicates_total", dimensions: [("kind", "finished_set")]).increment()
            return await record("finished status again", [publisher.message(finished)], delivery: message.position, log: log)
        } catch {
            watchdog.disarm()
            // Without the finished set a duplicate could run twice; leave the message for a retry.
            log.error("cannot read the worker state: \(error)")
            return false
        }
    }

    private func run(_ received: TransferRequest, message: KafkaMessage, watchdog: CheckWatchdog, log: Logger) async -> Bool {
        // A twin (same id) already running here is waited for; its outcome then answers this message too.
        let turn = turnsById.take(received.id)
        defer { turn.finish() }
        let twinRunning = turn.mustWait
        if twinRunning {
            log.info("transfer \(received.id) is already running on this worker; this message waits for its outcome")
            await watchdog.pause { await turn.wait() }
        } else {
            await turn.wait()
        }
        if let answered = await answerIfFinished(received.id, message: message, watchdog: watchdog, log: log) { return answered }
        if twinRunning && (Task.isCancelled || !owns(message)) {
            // The twin ended without an outcome because the worker stops or the partition went: so does this one.
            watchdog.disarm()
            return false
        }
        var request = received
        let sequencer = EventBuilder.sequencer(for: message)
        let job: TransferJob
        do throws(FerryError) {
            job = try await admit(&request, sequencer: sequencer)
            watchdog.disarm()
        } catch {
            watchdog.disarm()
            // A refused callback is not called; any other refusal is reported to it.
            let callback = (try? checkCallback(request.callback ?? "")) != nil ? request.callback : nil
            return await reject(message, error: error, id: request.id, op: request.op.rawValue, callback: callback, log: log)
        }
        let objectKey = job.objectKey
        let base = TransferStatus(id: request.id, op: request.op.rawValue, state: .accepted, attempt: 1, worker: workerId)
        let item = TransferItem(streams: streams, offset: message.offset)
        guard await accept(request, base: base, item: item, message: message, log: log) else { return false }
        log.info("\(request.op.rawValue) s3://\(request.bucket)/\(objectKey) accepted")

        inFlight.add(.init(id: request.id, op: request.op.rawValue, bucket: request.bucket, key: objectKey,
                           partition: message.partition, offset: message.offset, startedAt: Timestamp.iso8601(Date()),
                           state: .running, bytesTransferred: 0, totalBytes: nil))
        defer { inFlight.remove(request.id) }
        let reporter = ProgressReporter(publisher: publisher, template: base, interval: progressInterval) { [inFlight, id = request.id] state, progress in
            inFlight.update(id) {
                $0.state = state
                $0.bytesTransferred = progress.bytesTransferred
                $0.totalBytes = progress.totalBytes
            }
        }
        // Pause and resume (from ferry.control) are visible as `paused` and `running` statuses.
        let changes = SerialWrites()
        let control = TransferControl { [reporter, self] state in
            let next: TransferStatus.State
            switch state {
            case .paused: next = .paused
            case .running: next = .running
            case .cancelled: return  // the terminal status follows
            }
            reporter.stateChanged(next)
            var status = base
            status.state = next
            status.time = Timestamp.iso8601(Date())
            let change = streams.message(item.record(status))
            changes.append { _ = await record("\(next.rawValue) stream record", [change], log: log) }
        }
        // From here the fleet's decisions reach it: one sent before its request was
        // reached (a cancel of a queued request, a pause that outlived a restart or a
        // rebalance) applies now, before any byte moves.
        controls.attach(request.id, control)
        defer { controls.detach(request.id, control) }
        var final = base
        var messages: [OutboxMessage] = []
        do {
            let (outcome, extraRuns) = try await runThroughOutages(job, control: control, log: log, progress: reporter.report)
            if outcome.alreadyStored {
                log.info("duplicate request: the object already holds transfer \(request.id); event re-emitted with its first sequencer")
                Counter(label: "ferry_duplicates_total", dimensions: [("kind", "object_marker")]).increment()
            }
            if let eventName = outcome.eventName {
                // A re-emitted event keeps the sequencer the object was written with, so handlers can deduplicate.
                let event = events.event(for: request, outcome: outcome, eventName: eventName,
                                         sequencer: outcome.storedMetadata[TransferMarker.sequencer] ?? sequencer)
                messages.append(publisher.message(event, bucket: request.bucket, key: objectKey))
            }
            if let change = streams.objectRecord(request: request, outcome: outcome, offset: message.offset) {
                messages.append(streams.message(change))
            }
            final.state = .completed
            final.bytesTransferred = outcome.bytesTransferred
            final.totalBytes = outcome.object.size
            final.attempt = outcome.attempts + extraRuns
            final.object = outcome.object
            log.info("\(request.op.rawValue) completed", metadata: ["bytes": "\(outcome.bytesTransferred)",
                                                                      "eTag": "\(outcome.object.eTag ?? "-")"])
        } catch {
            if Task.isCancelled || control.isHandedOff {
                log.info("\(request.op.rawValue) stopped and left for redelivery: \(error)")
                return false
            }
            final.state = error.code == .cancelled ? .cancelled : .failed
            final.error = .init(error)
            final.bytesTransferred = control.meter.value
            log.error("\(request.op.rawValue) \(final.state.rawValue): \(error)")
        }
        final.time = Timestamp.iso8601(Date())
        messages.append(publisher.message(final))
        messages += publisher.callbackMessages(final, callback: request.callback)
        await changes.settle()  // pause/resume records first: one item's records stay in order
        messages.append(streams.message(item.record(final)))
        Counter(label: "ferry_transfers_total", dimensions: [("op", request.op.rawValue), ("outcome", final.state.rawValue)]).increment()
        Counter(label: "ferry_transfer_bytes_total", dimensions: [("op", request.op.rawValue)]).increment(by: Int64(final.bytesTransferred ?? 0))
        return await record("\(final.state.rawValue) outcome", messages, finished: final, endingTransfer: request.id,
                            streamOffset: message.offset, delivery: message.position, log: log)
    }

    /// The checks before any byte moves: identity proof, the access rules, the
    /// S3 key, S3's limits, the callback, the engine's preflight. Marks an
    /// upload or copy with the markers that make its redelivery recognisable.
    private func admit(_ request: inout TransferRequest, sequencer: String) async throws(FerryError) -> TransferJob {
        let caller = try await identity.caller(of: request)
        let decision = try policy.authorize(request, caller: caller)
        if request.op == .upload || request.op == .copy {
            // Markers that make a redelivery of this request recognisable on the object,
            // and name who wrote it (the proven caller, never an untrusted claim).
            var markers = [TransferMarker.transferId: request.id, TransferMarker.sequencer: sequencer,
                           TransferMarker.accessLevel: request.effectiveAccessLevel.rawValue]
            if let owner = caller.identityId { markers[TransferMarker.owner] = owner }
            request.metadata = (request.metadata ?? [:]).merging(markers) { _, marker in marker }
        }
        if let problem = RequestLimits.violation(of: request, objectKey: decision.objectKey) { throw problem }
        if let callback = request.callback { try checkCallback(callback) }
        var job = TransferJob(request: request, objectKey: decision.objectKey, localAreas: localAreas(of: caller))
        if let bucket = decision.copySourceBucket, let key = decision.copySourceKey {
            job.copySource = ObjectLocation(bucket: bucket, key: key)
        }
        try engine.preflight(job)
        return job
    }

    /// Journals the transfer and announces it: the `transfers` item's INSERT
    /// (accepted) and MODIFY (running) go into the outbox with the journal
    /// entry, in one transaction; the `accepted` status is sent at once. False
    /// only when the worker stops before they are recorded.
    private func accept(_ request: TransferRequest, base: TransferStatus, item: TransferItem, message: KafkaMessage,
                        log: Logger) async -> Bool {
        var running = base
        running.state = .running
        var opening = [streams.message(item.record(base)), streams.message(item.record(running))]
        do {
            try await state.beginTransfer(id: request.id, request: message.value, topic: message.topic,
                                          partition: message.partition, offset: message.offset, outbox: opening)
            opening = []
            outbox.nudge()
        } catch {
            log.warning("cannot journal the transfer (it runs, but a crash restarts it from S3's state): \(error)")
        }
        // Sent straight away, so it precedes the progress statuses; through the outbox if Kafka refuses it.
        if !(await publisher.sendNow(base)) { opening.insert(publisher.message(base), at: 0) }
        if !opening.isEmpty {
            guard await record("accepted status", opening, log: log) else { return false }
        }
        return true
    }

    /// Dead-letters a request that cannot run and publishes `rejected` when its id is known.
    func reject(_ message: KafkaMessage, error: FerryError, id: String?, op: String?, callback: String? = nil,
                        log: Logger) async -> Bool {
        log.warning("request rejected: \(error)")
        Counter(label: "ferry_transfers_total", dimensions: [("op", op ?? "unknown"), ("outcome", "rejected")]).increment()
        Counter(label: "ferry_dlq_messages_total", dimensions: [("topic", publisher.topics.requestsDLQ)]).increment()
        var messages = [publisher.deadLetter(message, error: error)]
        if let id {
            let status = TransferStatus(id: id, op: op, state: .rejected, worker: workerId, error: error)
            messages.append(publisher.message(status))
            messages.append(streams.message(streams.transferRecord(status, previous: nil, offset: message.offset, step: 0)))
            messages += publisher.callbackMessages(status, callback: callback)
        }
        return await record("rejection", messages, delivery: message.position, log: log)
    }

    /// A callback this worker can deliver: a reply topic outside Ferry's own
    /// (no loops into requests or control), or an https URL the callback
    /// policy allows, with a signing secret configured.
    func checkCallback(_ text: String) throws(FerryError) {
        switch try CompletionCallback(text) {
        case .kafka(let topic):
            let own = publisher.topics
            if topic.hasPrefix(own.prefix + ".") || own.all.contains(topic) {
                throw FerryError(.invalidRequest, "callback topic \(topic) is one of Ferry's own (\(own.prefix).*); name a reply topic of yours")
            }
        case .https(let url):
            guard callbacks.secret != nil else {
                throw FerryError(.invalidRequest, "https callbacks are off on this worker (they need --callback-secret-file to be signed)")
            }
            if let refusal = callbacks.policy.refusal(of: url, what: "callback") { throw refusal }
        }
    }

    /// Dead-letters a message the crash-loop breaker quarantined (it was started
    /// `starts` times and its worker stopped each time) and publishes
    /// `rejected` when its id can be read without decoding it. With `withheld`
    /// (quarantining it failed before) nothing of it is parsed, not even for
    /// redaction: the record carries its length and SHA-256 instead of its bytes.
    func quarantine(_ message: KafkaMessage, starts: Int, withheld: Bool) async -> Bool {
        var log = logger
        log[metadataKey: "partition"] = "\(message.partition)"
        log[metadataKey: "offset"] = "\(message.offset)"
        let error = FerryError(.poisonMessage, "the message was started \(starts) times and its worker stopped each time (a crash, an abort or a kill); quarantined by the crash-loop breaker")
        log.error("poison message quarantined: \(error.message)")
        Counter(label: "ferry_dlq_messages_total", dimensions: [("topic", publisher.topics.requestsDLQ)]).increment()
        let startsHeader = OutboxMessage.Header(DLQHeader.starts, String(starts))
        if withheld {
            let letter = publisher.withheldDeadLetter(message, error: error, extra: [startsHeader])
            return await record("poison message dead letter", [letter], delivery: message.position, log: log)
        }
        let id = RequestDecoder.idHint(message.value)
        // Its transfer may have finished after all (a kill, not a crash, stopped its
        // workers): then the outcome stands and is answered again, as for any duplicate.
        if let id, let finished = try? await state.finishedStatus(id: id) {
            log.warning("message started \(starts) times without an outcome, but transfer \(id) already finished (\(finished.state.rawValue)); answering from the finished set instead of quarantining it")
            Counter(label: "ferry_duplicates_total", dimensions: [("kind", "finished_set")]).increment()
            return await record("finished status again", [publisher.message(finished)], delivery: message.position, log: log)
        }
        var messages = [publisher.deadLetter(message, error: error, extra: [startsHeader])]
        if let id {
            let status = TransferStatus(id: id, op: nil, state: .rejected, worker: workerId, error: error)
            messages.append(publisher.message(status))
        }
        Counter(label: "ferry_transfers_total", dimensions: [("op", "unknown"), ("outcome", "rejected")]).increment()
        return await record("poison message dead letter", messages, delivery: message.position, log: log)
    }

    /// Writes messages (and a terminal outcome) to the outbox, retrying while
    /// the disk refuses; false only when the worker is stopping.
    func record(_ what: String, _ messages: [OutboxMessage], finished: TransferStatus? = nil,
                        endingTransfer id: String? = nil, streamOffset: Int64? = nil, delivery: DeliveryPosition? = nil,
                        items: [ItemVersion] = [], releases: [ObjectReference] = [],
                        releasedBy: (requestId: String, sequencer: String) = ("", ""), log: Logger) async -> Bool {
        let written: Void? = await Backoff.localState.untilSuccess(failed: { error, retry in
            log.error("cannot write the \(what) to the outbox, retry \(retry): \(error)")
        }) {
            try await state.commitOutcome(messages, finished: finished, endingTransfer: id, streamOffset: streamOffset,
                                          delivery: delivery, items: items, releases: releases, releasedBy: releasedBy)
        }
        guard written != nil else { return false }
        outbox.nudge()
        return true
    }
}

extension KafkaMessage {
    /// Where the message is, as the worker state keys its start record.
    var position: DeliveryPosition { DeliveryPosition(topic: topic, partition: partition, offset: offset) }
}
