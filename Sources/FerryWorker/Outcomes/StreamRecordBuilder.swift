import FerryCore
import FerryEngine
import FerryS3
import FerryStorage
import FerryStore
import Foundation
import Synchronization

/// Builds the DynamoDB-stream records of the two tables Ferry keeps as
/// streams, `objects` (key `bucket` + `key`) and `transfers` (key `id`), and
/// of the record tables declared with `--table`.
/// Records are published with full images (NEW_AND_OLD_IMAGES); the trigger
/// dispatcher projects them to the view type each handler registered.
struct StreamRecordBuilder: Sendable {
    static let objectsTable = "objects"
    static let transfersTable = "transfers"

    var region: String
    var topics: Topics

    func arn(_ table: String) -> String { "arn:aws:dynamodb:\(region):000000000000:table/\(table)/stream/ferry" }

    /// `1` + the request offset (20 digits) + a step (4 digits): 25 digits that
    /// grow per item key, because one key's requests share a partition and one
    /// transfer's records share its request's offset. A redelivered request
    /// yields the same numbers, so (table, key, SequenceNumber) identifies a change.
    static func sequenceNumber(offset: Int64, step: Int) -> String {
        "1" + Digits.decimal(max(0, offset), width: 20) + Digits.decimal(Int64(min(max(0, step), 9999)), width: 4)
    }

    /// The step of a `transfers` item's expiry: after every state change.
    static let expiryStep = 9999

    // MARK: objects

    /// The record of a write or removal; nil for reads and for removing a key that held nothing.
    func objectRecord(request: TransferRequest, outcome: TransferOutcome, offset: Int64, step: Int = 0, at time: Date = Date()) -> DynamoDBEvent.Record? {
        guard let eventName = outcome.eventName else { return nil }
        let keys: AttributeMap = ["bucket": .string(outcome.object.bucket), "key": .string(outcome.object.key)]
        let old = outcome.previous.map { image(of: $0, keys: keys) }
        let name: DynamoDBEvent.EventName
        var new: AttributeMap?
        if eventName.hasPrefix("ObjectRemoved") {
            guard outcome.previous != nil else { return nil }
            name = .remove
        } else {
            // A redelivered write no longer knows what the key held: it is reported as a change without an old image.
            name = (old != nil || !outcome.previousKnown) ? .modify : .insert
            var image = keys
            image["size"] = outcome.object.size.map { .number($0) }
            image["eTag"] = outcome.object.eTag.map { .string(EventBuilder.unquoted($0)) }
            image["contentType"] = outcome.contentType.map { .string($0) }
            image["owner"] = request.identityId.map { .string($0) }
            image["accessLevel"] = .string(request.effectiveAccessLevel.rawValue)
            image["metadata"] = .map(userMetadata(outcome.metadata))
            image["lastModified"] = .string(Timestamp.iso8601(time))
            new = image
        }
        return record(table: Self.objectsTable, name: name, keys: keys, new: new, old: old,
                      sequence: Self.sequenceNumber(offset: offset, step: step), time: time)
    }

    private func image(of object: ObjectAttributes, keys: AttributeMap) -> AttributeMap {
        var image = keys
        image["size"] = .number(object.size)
        image["eTag"] = object.eTag.map { .string(EventBuilder.unquoted($0)) }
        image["contentType"] = object.contentType.map { .string($0) }
        image["owner"] = object.metadata[TransferMarker.owner].map { .string($0) }
        image["accessLevel"] = object.metadata[TransferMarker.accessLevel].map { .string($0) }
        image["metadata"] = .map(userMetadata(object.metadata))
        image["lastModified"] = object.lastModified.map { .string(Timestamp.iso8601($0)) }
        return image
    }

    private func userMetadata(_ metadata: [String: String]) -> AttributeMap {
        metadata.filter { !TransferMarker.isMarker($0.key) }.mapValues { .string($0) }
    }

    // MARK: transfers

    /// INSERT for the first state of a transfer, MODIFY for each change, REMOVE when it expires.
    func transferRecord(_ status: TransferStatus, previous: TransferStatus?, offset: Int64, step: Int,
                        expired: Bool = false, at time: Date = Date()) -> DynamoDBEvent.Record {
        let keys: AttributeMap = ["id": .string(status.id)]
        let name: DynamoDBEvent.EventName = expired ? .remove : (previous == nil ? .insert : .modify)
        let new = expired ? nil : image(of: status)
        let old = expired ? image(of: status) : previous.map(image(of:))
        return record(table: Self.transfersTable, name: name, keys: keys, new: new, old: old,
                      sequence: Self.sequenceNumber(offset: offset, step: expired ? Self.expiryStep : step), time: time,
                      userIdentity: expired ? .service : nil)
    }

    private func image(of status: TransferStatus) -> AttributeMap {
        var image: AttributeMap = ["id": .string(status.id), "state": .string(status.state.rawValue),
                                   "updatedAt": .string(status.time)]
        image["op"] = status.op.map { .string($0) }
        image["bytes"] = status.bytesTransferred.map { .number($0) }
        image["totalBytes"] = status.totalBytes.map { .number($0) }
        image["attempts"] = status.attempt.map { .number($0) }
        image["worker"] = status.worker.map { .string($0) }
        if let object = status.object {
            image["bucket"] = .string(object.bucket)
            image["key"] = .string(object.key)
        }
        if let error = status.error {
            image["error"] = .map(["code": .string(error.code), "message": .string(error.message)])
        }
        return image
    }

    // MARK: record tables

    /// `3` + the item's version (20 digits) + `0000`: grows with every write of the item, whichever worker made it.
    static func itemSequenceNumber(version: Int64) -> String {
        "3" + Digits.decimal(max(0, version), width: 20) + "0000"
    }

    /// A change of a declared record table's item.
    func itemRecord(table: String, name: DynamoDBEvent.EventName, keys: AttributeMap, new: AttributeMap?, old: AttributeMap?,
                    version: Int64, time: Date = Date()) -> DynamoDBEvent.Record {
        record(table: table, name: name, keys: keys, new: new, old: old, sequence: Self.itemSequenceNumber(version: version), time: time,
               userIdentity: nil)
    }

    // MARK: records and messages

    /// A record of the `objects` table.
    func objectsRecord(name: DynamoDBEvent.EventName, keys: AttributeMap, new: AttributeMap?, old: AttributeMap?,
                       sequence: String, time: Date) -> DynamoDBEvent.Record {
        record(table: Self.objectsTable, name: name, keys: keys, new: new, old: old, sequence: sequence, time: time)
    }

    private func record(table: String, name: DynamoDBEvent.EventName, keys: AttributeMap, new: AttributeMap?, old: AttributeMap?,
                        sequence: String, time: Date, userIdentity: DynamoDBEvent.UserIdentity? = nil) -> DynamoDBEvent.Record {
        let stream = StreamRecord(approximateCreationDateTime: (time.timeIntervalSince1970 * 1000).rounded() / 1000,
                                  keys: keys, newImage: new, oldImage: old, sequenceNumber: sequence,
                                  streamViewType: .newAndOldImages)
        return DynamoDBEvent.Record(eventID: Self.eventID(table: table, itemKey: stream.itemKey, sequence: sequence), eventName: name,
                                    awsRegion: region, eventSourceARN: arn(table), userIdentity: userIdentity, dynamodb: stream)
    }

    /// 32 hex digits derived from the change's identity, so a redelivered change has the same id.
    static func eventID(table: String, itemKey: String, sequence: String) -> String {
        let identity = "\(table)\u{0}\(itemKey)\u{0}\(sequence)"
        return Digest.md5(Array(identity.utf8)).hexString
    }

    /// The Kafka message, keyed `<table>/<item key>`.
    func message(_ record: DynamoDBEvent.Record) -> OutboxMessage {
        OutboxMessage(topic: topics.streams, key: Array(record.kafkaKey.utf8),
                      value: try! record.jsonBytes())  // its creation time comes from the clock: finite
    }
}

/// One transfer's `transfers` item while it runs: numbers its records and
/// remembers the last image, which is the next record's old image.
final class TransferItem: Sendable {
    private let streams: StreamRecordBuilder
    private let offset: Int64
    private let state: Mutex<(step: Int, last: TransferStatus?)>

    init(streams: StreamRecordBuilder, offset: Int64) {
        self.streams = streams
        self.offset = offset
        state = Mutex((0, nil))
    }

    func record(_ status: TransferStatus) -> DynamoDBEvent.Record {
        state.withLock { item in
            defer { item.step += 1; item.last = status }
            return streams.transferRecord(status, previous: item.last, offset: offset, step: item.step)
        }
    }
}

/// Runs async writes one after another, in the order they were appended.
final class SerialWrites: Sendable {
    private let tail = Mutex<Task<Void, Never>?>(nil)

    func append(_ write: @escaping @Sendable () async -> Void) {
        tail.withLock { last in
            let previous = last
            last = Task { await previous?.value; await write() }
        }
    }

    /// Waits for every write appended so far.
    func settle() async {
        await tail.withLock { $0 }?.value
    }
}
