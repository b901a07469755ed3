import FerryCore
import FerryEngine
import FerryKafka
import FerryS3
import FerryStorage
import FerryStore
import Foundation
import Logging
import Metrics

/// Item requests (docs/producers/records.md): every file the item
/// carries is checked before any byte moves, uploaded through the engine
/// under the caller's access level, and only then is the item written, with
/// its table record, its stream record and the files' events in the same
/// outbox transaction as the outcome. A crash before that transaction leaves
/// the message uncommitted: it runs again, its uploads are found already
/// stored (transfer-id markers), and the item is written then. No item ever
/// points at a file that is not stored.
extension RequestPipeline {
    func runItem(_ request: ItemRequest, message: KafkaMessage, watchdog: CheckWatchdog, log: Logger) async -> Bool {
        if let answered = await answerIfFinished(request.id, message: message, watchdog: watchdog, log: log) { return answered }
        let op = request.op.rawValue
        let callback = request.callback.flatMap { (try? checkCallback($0)) != nil ? $0 : nil }
        // Before anything moves: the table, the key, who acts, every file's access and source.
        let plan: ItemPlan
        do throws(FerryError) {
            plan = try itemPlan(request, sequencer: EventBuilder.sequencer(for: message), caller: try await identity.caller(of: request.envelope))
            if let callback = request.callback { try checkCallback(callback) }
            watchdog.disarm()
        } catch {
            watchdog.disarm()
            return await reject(message, error: error, id: request.id, op: op, callback: callback, log: log)
        }
        let turn = tables.itemTurns.take("\(plan.table.name)\u{0}\(plan.itemKey)")
        await turn.wait()
        defer { turn.finish() }
        guard let current = await currentItem(plan, log: log) else { return false }
        if let settled = await settledBefore(request, plan: plan, current: current, message: message, callback: callback, log: log) {
            return settled
        }
        guard let files = await uploadFiles(request, plan: plan, message: message, log: log) else { return false }
        var status = TransferStatus(id: request.id, op: op, state: .completed, attempt: 1, worker: workerId)
        status.bytesTransferred = files.bytes
        var messages = files.messages
        let held = current.record?.item.referencedObjects ?? []
        let released: [ObjectReference]
        var written: ItemVersion?
        if let failure = files.failure {
            // No item: the files this request stored go again, unless the item already points at them.
            status.state = .failed
            status.error = .init(failure)
            released = files.uploaded.filter { !held.contains($0) }
            log.error("\(op) failed, the item is not written: \(failure)")
        } else {
            let change = itemChange(request, plan: plan, current: current, item: files.item)
            written = change.written
            messages += change.messages
            released = plan.table.deletesUnreferencedFiles ? held.subtracting(change.record?.item.referencedObjects ?? []).sorted() : []
            log.info("\(op) \(plan.table.name) \(plan.itemKey) completed", metadata: [
                "version": "\(written?.version ?? current.version)", "files": "\(files.uploaded.count)", "released": "\(released.count)"])
        }
        status.time = Timestamp.iso8601(Date())
        messages.append(publisher.message(status))
        messages += publisher.callbackMessages(status, callback: callback)
        Counter(label: "ferry_items_total", dimensions: [("op", op), ("outcome", status.state.rawValue)]).increment()
        return await record("\(status.state.rawValue) item outcome", messages, finished: status, delivery: message.position,
                            items: written.map { [$0] } ?? [], releases: released,
                            releasedBy: (request.id, plan.sequencer), log: log)
    }

    /// The item as the fleet last wrote it (version 0 when there is none),
    /// once this worker's view has caught up with the table's topic; nil when
    /// it cannot be known now, and the request is left for redelivery.
    private func currentItem(_ plan: ItemPlan, log: Logger) async -> (record: ItemRecord?, version: Int64)? {
        if let follower = tables.follower {
            do throws(FerryError) {
                try await follower.caughtUp(table: plan.table.name)
            } catch {
                log.warning("\(error); the request is left for redelivery")
                return nil
            }
        }
        do {
            return try await state.currentItem(table: plan.table.name, itemKey: plan.itemKey) ?? (nil, 0)
        } catch {
            log.error("cannot read the item view: \(error)")
            return nil
        }
    }

    /// The outcome of a request the item's state already decides: one another
    /// worker wrote before a rebalance (completed again), one the owner rule
    /// refuses, or an item at its last version. Nil when the request is to run.
    private func settledBefore(_ request: ItemRequest, plan: ItemPlan, current: (record: ItemRecord?, version: Int64),
                               message: KafkaMessage, callback: String?, log: Logger) async -> Bool? {
        let op = request.op.rawValue
        if let held = current.record, held.requestId == request.id {
            log.info("duplicate request: item \(plan.itemKey) of \(plan.table.name) already holds \(request.id) (version \(held.version))")
            Counter(label: "ferry_duplicates_total", dimensions: [("kind", "item_version")]).increment()
            let status = TransferStatus(id: request.id, op: op, state: .completed, attempt: 1, worker: workerId)
            return await record("completed item outcome again", [publisher.message(status)] + publisher.callbackMessages(status, callback: callback),
                                finished: status, delivery: message.position, log: log)
        }
        // Amplify's owner rule: an item an authenticated caller created is theirs to change.
        if let owner = current.record?.owner, owner != plan.caller.identityId {
            let error = FerryError(.accessDenied, "item \(plan.itemKey) of table \(plan.table.name) belongs to another identity")
            return await reject(message, error: error, id: request.id, op: op, callback: callback, log: log)
        }
        guard current.version < ItemRecord.versions.upperBound else {
            let error = FerryError(.invalidRequest, "item \(plan.itemKey) of table \(plan.table.name) is at its last version")
            return await reject(message, error: error, id: request.id, op: op, callback: callback, log: log)
        }
        return nil
    }

    /// What uploading an item's files gave: the item with each file input
    /// replaced by its stored `S3Object`, the files' events and `objects`
    /// records, or the failure that ended the uploads.
    struct UploadedFiles {
        var item: AttributeMap
        var uploaded: [ObjectReference] = []
        var messages: [OutboxMessage] = []
        var bytes: Int64?
        var failure: FerryError?
    }

    /// Uploads the item's files one after another through the engine; nil when
    /// the worker is stopping (the request is redelivered).
    private func uploadFiles(_ request: ItemRequest, plan: ItemPlan, message: KafkaMessage, log: Logger) async -> UploadedFiles? {
        var files = UploadedFiles(item: request.item)  // put: the whole item; update: the attributes to set
        for file in plan.files {
            do throws(FerryError) {
                let outcome = try await runThroughOutages(file.job, control: TransferControl(), log: log, progress: { _ in }).outcome
                files.uploaded.append(ObjectReference(bucket: outcome.object.bucket, key: outcome.object.key, transferId: file.job.request.id))
                if let eventName = outcome.eventName {
                    let event = events.event(for: file.job.request, outcome: outcome, eventName: eventName,
                                             sequencer: outcome.storedMetadata[TransferMarker.sequencer] ?? plan.sequencer)
                    files.messages.append(publisher.message(event, bucket: outcome.object.bucket, key: outcome.object.key))
                }
                if let change = streams.objectRecord(request: file.job.request, outcome: outcome, offset: message.offset) {
                    files.messages.append(streams.message(change))
                }
                let image = S3ObjectImage.make(bucket: outcome.object.bucket, key: outcome.object.key, region: file.input.region ?? streams.region,
                                               version: outcome.object.versionId, size: outcome.object.size,
                                               eTag: outcome.object.eTag.map(EventBuilder.unquoted), mimeType: outcome.contentType,
                                               transferId: file.job.request.id)
                files.item.set(image, at: file.input.path)
                files.bytes = (files.bytes ?? 0) + outcome.bytesTransferred
            } catch {
                if Task.isCancelled { return nil }
                files.failure = error
                break
            }
        }
        return files
    }

    /// The item's next version (nil for a delete), its table record and its
    /// stream record; no messages for a delete of an item that is not there.
    private func itemChange(_ request: ItemRequest, plan: ItemPlan, current: (record: ItemRecord?, version: Int64), item: AttributeMap)
        -> (record: ItemRecord?, written: ItemVersion?, messages: [OutboxMessage]) {
        let next = current.version + 1
        let owner = current.record?.owner ?? plan.caller.identityId
        let record: ItemRecord?
        switch request.op {
        case .putItem:
            record = plan.record(item: item, version: next, owner: owner, requestId: request.id)
        case .updateItem:
            var merged = current.record?.item ?? plan.keys
            for (name, value) in item { merged[name] = value }
            for name in request.remove { merged[name] = nil }
            record = plan.record(item: merged, version: next, owner: owner, requestId: request.id)
        case .deleteItem:
            record = nil
        }
        guard record != nil || current.record != nil else { return (nil, nil, []) }
        let name: DynamoDBEvent.EventName = record == nil ? .remove : (current.record == nil ? .insert : .modify)
        return (record, ItemVersion(table: plan.table.name, itemKey: plan.itemKey, version: next, record: record), [
            tableMessage(plan, version: next, record: record, requestId: request.id),
            streams.message(streams.itemRecord(table: plan.table.name, name: name, keys: plan.keys,
                                               new: record?.item, old: current.record?.item, version: next)),
        ])
    }

    private func tableMessage(_ plan: ItemPlan, version: Int64, record: ItemRecord?, requestId: String) -> OutboxMessage {
        let headers = [OutboxMessage.Header(ItemRecord.versionHeader, String(version)), OutboxMessage.Header(ItemRecord.requestHeader, requestId)]
        let value = record.map { try! FerryJSON.encode($0) } ?? []
        return OutboxMessage(topic: publisher.topics.table(plan.table.name), key: Array(plan.itemKey.utf8), value: value, headers: headers)
    }

    /// Everything checked before an item request takes its turn.
    private func itemPlan(_ request: ItemRequest, sequencer: String, caller: Caller) throws(FerryError) -> ItemPlan {
        guard let table = tables.definitions[request.table] else {
            let known = tables.definitions.keys.sorted().joined(separator: ", ")
            throw FerryError(.invalidRequest, "table \(request.table) is not declared on this worker (declared: \(known.isEmpty ? "none" : known))")
        }
        let keys: AttributeMap
        switch request.op {
        case .putItem:
            keys = try table.keys(of: request.item)
        case .updateItem, .deleteItem:
            keys = try table.keys(of: request.key)
            guard Set(request.key.keys) == Set(table.keyAttributes) else {
                throw FerryError(.invalidRequest, "'key' names exactly the key attributes of \(table.name): \(table.keyAttributes.joined(separator: ", "))")
            }
            for name in table.keyAttributes where request.item[name] != nil && request.item[name] != keys[name] || request.remove.contains(name) {
                throw FerryError(.invalidRequest, "updateItem may not change or remove the key attribute '\(name)'")
            }
        }
        let record = try Self.encodedSize(request.item)
        guard record <= ItemPlan.maxItemBytes else {
            throw FerryError(.requestTooLarge, "the item is \(record) bytes; a table record holds at most \(ItemPlan.maxItemBytes)")
        }
        var files: [ItemPlan.File] = []
        for (index, input) in request.files.enumerated() {
            var upload = TransferRequest(id: Self.fileTransferId(request.id, index), op: .upload, bucket: input.bucket, key: input.key,
                                         accessLevel: request.accessLevel, identityId: request.identityId, source: input.source,
                                         contentType: input.mimeType)
            if let problem = RequestDecoder.validate(upload) { throw FerryError(problem.code, "\(input.pathText): \(problem.message)") }
            let decision = try policy.authorize(upload, caller: caller)
            var markers = [TransferMarker.transferId: upload.id, TransferMarker.sequencer: sequencer,
                           TransferMarker.accessLevel: upload.effectiveAccessLevel.rawValue]
            if let owner = caller.identityId { markers[TransferMarker.owner] = owner }
            upload.metadata = markers
            if let problem = RequestLimits.violation(of: upload, objectKey: decision.objectKey) { throw problem }
            let job = TransferJob(request: upload, objectKey: decision.objectKey, localAreas: localAreas(of: caller))
            do throws(FerryError) {
                try engine.preflight(job)
            } catch {
                throw FerryError(error.code, "\(input.pathText): \(error.message)")
            }
            files.append(ItemPlan.File(input: input, job: job))
        }
        return ItemPlan(table: table, keys: keys, itemKey: table.itemKey(keys), caller: caller, files: files, sequencer: sequencer)
    }

    /// `<request id>.f<n>`, or a digest of the id when that would pass 128 characters: stable across redeliveries.
    static func fileTransferId(_ id: String, _ index: Int) -> String {
        let plain = "\(id).f\(index)"
        if plain.utf8.count <= RequestDecoder.maxIdLength { return plain }
        let digest = Digest.sha256(Array(id.utf8)).prefix(16).hexString
        return "\(digest).f\(index)"
    }
}

/// An item request that passed every check: where it writes, who writes, what it uploads.
struct ItemPlan: Sendable {
    struct File: Sendable {
        var input: FileInput
        var job: TransferJob
    }
    /// A table record must fit one Kafka message with room for its envelope.
    static let maxItemBytes = 800_000

    var table: TableDefinition
    var keys: AttributeMap
    var itemKey: String
    var caller: Caller
    var files: [File]
    var sequencer: String

    func record(item: AttributeMap, version: Int64, owner: String?, requestId: String) -> ItemRecord {
        ItemRecord(table: table.name, keySchema: table.keyAttributes, keys: keys, item: item, version: version, owner: owner,
                   requestId: requestId, updatedAt: Timestamp.iso8601(Date()))
    }
}

extension ItemRequest {
    /// The fields identity proof reads, in a transfer request's shape.
    var envelope: TransferRequest {
        TransferRequest(id: id, op: op == .deleteItem ? .delete : .upload, bucket: files.first?.bucket ?? "ferry-items",
                        key: table, accessLevel: accessLevel, identityId: identityId, auth: auth)
    }
}

private extension RequestPipeline {
    static func encodedSize(_ item: AttributeMap) throws(FerryError) -> Int {
        do { return try FerryJSON.encode(item).count } catch { throw FerryError(.invalidRequest, "the item cannot be encoded: \(error)") }
    }
}
