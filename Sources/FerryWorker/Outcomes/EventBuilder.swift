import FerryCore
import FerryEngine
import FerryKafka
import Foundation

/// Builds the S3 event notification of a finished transfer.
struct EventBuilder: Sendable {
    var region: String
    /// The notification configuration id carried in every event.
    var configurationId = "ferry-events"

    func event(for request: TransferRequest, outcome: TransferOutcome, eventName: String, sequencer: String,
               at time: Date = Date()) -> S3Event {
        let principal = S3Event.UserIdentity(principalId: request.identityId ?? "ferry")
        let removed = eventName.hasPrefix("ObjectRemoved")
        let object = S3Event.Object(rawKey: outcome.object.key,
                                    size: removed ? nil : outcome.object.size,
                                    eTag: removed ? nil : outcome.object.eTag.map(Self.unquoted),
                                    versionId: outcome.object.versionId,
                                    sequencer: sequencer)
        let record = S3Event.Record(
            awsRegion: region, eventTime: Timestamp.iso8601(time), eventName: eventName, userIdentity: principal,
            requestParameters: .init(sourceIPAddress: "127.0.0.1"),
            responseElements: .init(requestId: outcome.requestId, id2: outcome.hostId),
            s3: .init(configurationId: configurationId,
                      bucket: .init(name: outcome.object.bucket, ownerIdentity: .init(principalId: "ferry")),
                      object: object))
        return S3Event(records: [record])
    }

    /// AWS sends eTag without the quotes of the HTTP header.
    static func unquoted(_ eTag: String) -> String {
        eTag.count >= 2 && eTag.hasPrefix("\"") && eTag.hasSuffix("\"") ? String(eTag.dropFirst().dropLast()) : eTag
    }
}

extension EventBuilder {
    /// The sequencer of the event a request causes: the request's offset, in
    /// 16 hex digits. One key's requests share a partition (the message key is
    /// `bucket/key`), so it grows per key; and a redelivered request gets the
    /// same one, so the re-emitted event has the same identity (bucket, key,
    /// sequencer) and handlers can deduplicate. (It restarts if the requests
    /// topic is recreated or its partition count changes.)
    static func sequencer(for message: KafkaMessage) -> String {
        Digits.upperHex(UInt64(max(0, message.offset)), width: 16)
    }
}
