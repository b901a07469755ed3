import FerryCore
import FerryEngine
import FerryStore
import Foundation
import Logging
import Metrics

/// Deletes the files item writes let go: those a replaced, updated or
/// deleted item no longer references (tables declared `delete-files`) and
/// those a failed item request had already stored. The release was queued in
/// the transaction that wrote the outcome, so it survives any crash; each
/// deletion's `ObjectRemoved:Delete` event and `objects` REMOVE record go to
/// the outbox in the transaction that ends the release. A key written again
/// by another transfer since (its `ferry-transfer-id` differs) is left alone.
struct FileReleaser: Sendable {
    let state: WorkerStateStore
    let engine: TransferEngine
    let publisher: OutcomePublisher
    let events: EventBuilder
    let streams: StreamRecordBuilder
    let outbox: OutboxDrainer
    let logger: Logger

    func run() async {
        while !Task.isCancelled {
            let released = await releaseBatch()
            try? await Task.sleep(for: .milliseconds(released > 0 ? 50 : 500))
        }
    }

    /// Releases up to 50 files; returns how many ended (deleted or left to a newer writer).
    func releaseBatch() async -> Int {
        let pending: [FileRelease]
        do {
            pending = try await state.pendingReleases(limit: 50)
        } catch {
            logger.warning("cannot read the file releases: \(error)")
            return 0
        }
        var ended = 0
        for release in pending where !Task.isCancelled {
            do throws(FerryError) {
                let messages = try await delete(release)
                do {
                    try await state.completeRelease(id: release.id, messages: messages)
                    outbox.nudge()
                    ended += 1
                } catch {
                    logger.warning("cannot end the release of s3://\(release.object.bucket)/\(release.object.key): \(error)")
                }
            } catch {
                logger.warning("cannot delete the released file s3://\(release.object.bucket)/\(release.object.key), trying again: \(error)")
            }
        }
        return ended
    }

    private func delete(_ release: FileRelease) async throws(FerryError) -> [OutboxMessage] {
        let object = release.object
        guard let held = try await engine.store.headObject(bucket: object.bucket, key: object.key, headers: [:]) else {
            return []  // already gone
        }
        guard held.metadata[TransferMarker.transferId] == object.transferId else {
            logger.info("released file s3://\(object.bucket)/\(object.key) was written again since (transfer \(held.metadata[TransferMarker.transferId] ?? "-")); left in place")
            Counter(label: "ferry_item_files_released_total", dimensions: [("outcome", "rewritten")]).increment()
            return []
        }
        let request = TransferRequest(id: "\(release.requestId).release", op: .delete, bucket: object.bucket, key: object.key)
        let outcome = try await engine.run(TransferJob(request: request, objectKey: object.key), logger: logger)
        Counter(label: "ferry_item_files_released_total", dimensions: [("outcome", "deleted")]).increment()
        logger.info("deleted s3://\(object.bucket)/\(object.key), no longer referenced (request \(release.requestId))")
        var messages: [OutboxMessage] = []
        if let eventName = outcome.eventName {
            messages.append(publisher.message(events.event(for: request, outcome: outcome, eventName: eventName, sequencer: release.sequencer),
                                              bucket: object.bucket, key: object.key))
        }
        // Numbered after the releasing request (its offset is in the sequencer), step 1: after the writes it released.
        let offset = Int64(release.sequencer, radix: 16) ?? 0
        if let change = streams.objectRecord(request: request, outcome: outcome, offset: offset, step: 1) {
            messages.append(streams.message(change))
        }
        return messages
    }
}
