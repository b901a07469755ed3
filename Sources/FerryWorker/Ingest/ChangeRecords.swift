import FerryCore
import FerryStore
import Foundation

/// Events and `objects` records for writes that did not go through a worker
/// (a store's notification, or what a reconciliation found).
extension EventBuilder {
    /// The event in AWS's exact shape: `aws:s3`, version 2.1, the key
    /// form-encoded, no size on removals, milliseconds.
    func event(for change: StoreNotification, sequencer: String) -> S3Event {
        let removed = change.isRemoval
        let object = S3Event.Object(rawKey: change.key, size: removed ? nil : change.size, eTag: removed ? nil : change.eTag,
                                    versionId: change.versionId, sequencer: sequencer)
        let record = S3Event.Record(
            awsRegion: change.region.isEmpty ? region : change.region, eventTime: change.eventTime, eventName: change.eventName,
            userIdentity: .init(principalId: change.principalId.isEmpty ? "\(change.store)-user" : change.principalId),
            requestParameters: .init(sourceIPAddress: ""),
            responseElements: .init(requestId: change.requestId, id2: change.hostId),
            s3: .init(configurationId: configurationId, bucket: .init(name: change.bucket, ownerIdentity: .init(principalId: change.store)),
                      object: object))
        return S3Event(records: [record])
    }

    /// The store's sequencer when it sent one; otherwise the event time in
    /// microseconds, 16 hex digits, which grows per key.
    static func sequencer(for change: StoreNotification) -> String {
        if let sequencer = change.sequencer { return sequencer }
        return Digits.upperHex(UInt64(microseconds(of: eventDate(change))), width: 16)
    }

    /// When the change happened (now, when its time cannot be read).
    static func eventDate(_ change: StoreNotification) -> Date {
        Timestamp.parseInternetDateTime(change.eventTime) ?? Date()
    }

    /// Microseconds since 1970, never negative and never past Int.max, whatever the date.
    static func microseconds(of date: Date) -> Int {
        (date.timeIntervalSince1970 * 1_000_000).clampedInt(0...Int.max)
    }
}

extension StreamRecordBuilder {
    /// INSERT when nothing was known at the key, MODIFY (with the old image)
    /// otherwise, REMOVE for a removal (old image: what was known, or the keys).
    /// Sequence numbers: `2` + the event time in microseconds (20 digits) +
    /// `0000`, growing per key among these records.
    func objectRecord(change: StoreNotification, new: ObjectCatalog.Entry?, old: ObjectCatalog.Entry?) -> DynamoDBEvent.Record {
        let keys: AttributeMap = ["bucket": .string(change.bucket), "key": .string(change.key)]
        let date = EventBuilder.eventDate(change)
        let sequence = "2" + Digits.decimal(Int64(EventBuilder.microseconds(of: date)), width: 20) + "0000"
        let oldImage = old.map { image(of: $0, keys: keys) }
        if change.isRemoval {
            return objectsRecord(name: .remove, keys: keys, new: nil, old: oldImage ?? keys, sequence: sequence, time: date)
        }
        return objectsRecord(name: old == nil ? .insert : .modify, keys: keys, new: new.map { image(of: $0, keys: keys) },
                             old: oldImage, sequence: sequence, time: date)
    }

    private func image(of entry: ObjectCatalog.Entry, keys: AttributeMap) -> AttributeMap {
        var image = keys
        image["size"] = entry.size.map { .number($0) }
        image["eTag"] = entry.eTag.map { .string($0) }
        image["contentType"] = entry.contentType.map { .string($0) }
        image["owner"] = entry.owner.map { .string($0) }
        image["accessLevel"] = entry.accessLevel.map { .string($0) }
        image["metadata"] = .map(entry.metadata.filter { !TransferMarker.isMarker($0.key) }.mapValues { .string($0) })
        image["lastModified"] = entry.lastModified.map { .string($0) }
        return image
    }
}
