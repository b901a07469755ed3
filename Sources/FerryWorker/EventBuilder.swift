import FerryCore
import FerryEngine
import Foundation
import Synchronization

/// Builds the S3 event notification of a finished transfer.
struct EventBuilder: Sendable {
    var region: String
    /// The notification configuration id carried in every event.
    var configurationId = "ferry-events"
    let sequencer = SequencerClock()

    func event(for request: TransferRequest, outcome: TransferOutcome, eventName: String, at time: Date = Date()) -> S3Event {
        let principal = S3Event.UserIdentity(principalId: request.identityId ?? "ferry")
        let removed = eventName.hasPrefix("ObjectRemoved")
        let object = S3Event.Object(rawKey: outcome.object.key,
                                    size: removed ? nil : outcome.object.size,
                                    eTag: removed ? nil : outcome.object.eTag.map(Self.unquoted),
                                    versionId: outcome.object.versionId,
                                    sequencer: sequencer.next(at: time))
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

/// Hex sequencers that grow within this process: nanoseconds since the epoch,
/// bumped when the clock stands still or steps back. Fixed width (16 digits),
/// so comparing them as strings compares them as numbers.
final class SequencerClock: Sendable {
    private let last = Mutex<UInt64>(0)

    func next(at time: Date = Date()) -> String {
        let now = UInt64(max(0, time.timeIntervalSince1970) * 1_000_000_000)
        let value = last.withLock { last in
            last = max(now, last &+ 1)
            return last
        }
        return String(format: "%016llX", value)
    }
}
