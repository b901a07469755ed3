import FerryTriggerKit
import FerryCore
import FerryS3
import FerryStorage

/// What a failure record says in place of a payload too large for Kafka.
public struct OmittedPayload: Sendable, Codable, Hashable {
    /// Bytes of the whole record, as it would have been written.
    public var recordBytes: Int
    /// Hex SHA-256 of those bytes.
    public var recordSHA256: String
    public var reason: String
}

/// A failure record that can stand without its payload. A record that
/// carries a large event or batch (records written with JSON escapes grow up
/// to six times) would be refused by Kafka, and retrying it would hold the
/// trigger's partition forever: such a record is written without its payload
/// and says so (`payloadOmitted`), keeping what identifies the failure and,
/// for stream records, their Kafka position to read them again from.
protocol FailureRecord: Encodable, Sendable {
    func omittingPayload(_ omitted: OmittedPayload) -> Self
}

enum FailureRecordFit {
    /// The largest failure record written as it is: Ferry's limit for the
    /// messages it writes, below Kafka's default `message.max.bytes`.
    static let maxBytes = RequestLimits.maxMessageBytes

    static func omitted(_ encoded: [UInt8], reason: String) -> OmittedPayload {
        OmittedPayload(recordBytes: encoded.count, recordSHA256: Digest.sha256(encoded).hexString, reason: reason)
    }
}

extension InvocationRecord: FailureRecord {
    func omittingPayload(_ omitted: OmittedPayload) -> InvocationRecord {
        var record = self
        record.requestPayload = .raw("")
        record.payloadOmitted = omitted
        return record
    }
}

extension StreamFailureRecord: FailureRecord {
    func omittingPayload(_ omitted: OmittedPayload) -> StreamFailureRecord {
        var record = self
        record.records = []
        record.undecodable = nil
        record.payloadOmitted = omitted
        return record
    }
}
