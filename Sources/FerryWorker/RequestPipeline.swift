import FerryCore
import FerryEngine
import FerryKafka
import FerryStore
import Foundation
import Logging

/// What happens to one message of `<prefix>.requests`: decode and validate
/// (or dead-letter), answer duplicates from the finished set, run the
/// transfer, publish its event and terminal status. `process` returns true
/// once the message's outcome is durable in Kafka, i.e. its offset may be committed.
struct RequestPipeline: Sendable {
    let engine: TransferEngine
    let state: WorkerStateStore
    let publisher: OutcomePublisher
    let events: EventBuilder
    let resolver: any PrefixResolver
    let identity: IdentityVerifier
    let workerId: String
    let progressInterval: Double
    let logger: Logger

    func process(_ message: KafkaMessage) async -> Bool {
        var log = logger
        log[metadataKey: "partition"] = "\(message.partition)"
        log[metadataKey: "offset"] = "\(message.offset)"
        switch RequestDecoder.decode(message.value) {
        case .failure(let failure):
            return await reject(message, error: failure.error, id: failure.id, op: failure.op, log: log)
        case .success(let request):
            log[metadataKey: "transfer"] = "\(request.id)"
            return await run(request, message: message, log: log)
        }
    }

    private func run(_ request: TransferRequest, message: KafkaMessage, log: Logger) async -> Bool {
        do {
            if let finished = try await state.finishedStatus(id: request.id) {
                log.info("request \(request.id) already finished (\(finished.state.rawValue)); answering from the finished set")
                return await publisher.durably("status") { () async throws(KafkaError) in try await publisher.publish(finished) }
            }
        } catch {
            // Without the finished set a duplicate could run twice; leave the message for a retry.
            log.error("cannot read the worker state: \(error)")
            return false
        }
        // Before any byte moves: identity proof, the access rules, the S3 key, S3's limits.
        let objectKey: String
        do throws(FerryError) {
            try await identity.verify(request)
            try AccessPolicy.authorize(request, resolver: resolver)
            objectKey = try resolver.objectKey(for: request)
            if let problem = RequestLimits.violation(of: request, objectKey: objectKey) { throw problem }
            try engine.preflight(TransferJob(request: request, objectKey: objectKey))
        } catch {
            return await reject(message, error: error, id: request.id, op: request.op.rawValue, log: log)
        }
        let base = TransferStatus(id: request.id, op: request.op.rawValue, state: .accepted, attempt: 1, worker: workerId)
        guard await publisher.durably("accepted status", { () async throws(KafkaError) in try await publisher.publish(base) }) else { return false }
        log.info("\(request.op.rawValue) s3://\(request.bucket)/\(objectKey) accepted")

        let reporter = ProgressReporter(publisher: publisher, template: base, interval: progressInterval)
        let job = TransferJob(request: request, objectKey: objectKey)
        // Pause and resume (from ferry.control) are visible as `paused` and `running` statuses.
        let control = TransferControl { [reporter] state in
            switch state {
            case .paused: reporter.stateChanged(.paused)
            case .running: reporter.stateChanged(.running)
            case .cancelled: break  // the terminal status follows
            }
        }
        var final = base
        final.time = Timestamp.iso8601(Date())
        do {
            let outcome = try await engine.run(job, control: control, progress: reporter.report)
            if let eventName = outcome.eventName {
                let event = events.event(for: request, outcome: outcome, eventName: eventName)
                guard await publisher.durably("S3 event", { () async throws(KafkaError) in
                    try await publisher.publish(event, bucket: request.bucket, key: objectKey)
                }) else { return false }
            }
            final.state = .completed
            final.bytesTransferred = outcome.bytesTransferred
            final.totalBytes = outcome.object.size
            final.attempt = outcome.attempts
            final.object = outcome.object
            log.info("\(request.op.rawValue) completed", metadata: ["bytes": "\(outcome.bytesTransferred)",
                                                                      "eTag": "\(outcome.object.eTag ?? "-")"])
        } catch {
            if Task.isCancelled { return false }
            final.state = error.code == .cancelled ? .cancelled : .failed
            final.error = .init(error)
            final.bytesTransferred = control.meter.value
            log.error("\(request.op.rawValue) \(final.state.rawValue): \(error)")
        }
        final.time = Timestamp.iso8601(Date())
        let status = final
        guard await publisher.durably("\(status.state.rawValue) status", { () async throws(KafkaError) in
            try await publisher.publish(status)
        }) else { return false }
        do {
            try await state.recordFinished(status)
        } catch {
            log.error("cannot record the finished transfer (a redelivery would run it again): \(error)")
        }
        return true
    }

    /// Dead-letters a request that cannot run and publishes `rejected` when its id is known.
    private func reject(_ message: KafkaMessage, error: FerryError, id: String?, op: String?, log: Logger) async -> Bool {
        log.warning("request rejected: \(error)")
        guard await publisher.durably("dead letter", { () async throws(KafkaError) in
            try await publisher.deadLetter(message, error: error)
        }) else { return false }
        guard let id else { return true }
        let status = TransferStatus(id: id, op: op, state: .rejected, worker: workerId, error: error)
        return await publisher.durably("rejected status") { () async throws(KafkaError) in try await publisher.publish(status) }
    }
}
