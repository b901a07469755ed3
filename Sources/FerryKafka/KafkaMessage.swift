import CRdKafka
import Foundation

/// A consumed record, copied out of librdkafka's buffers.
public struct KafkaMessage: Sendable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
    public var key: [UInt8]?
    public var value: [UInt8]
    public var headers: [(String, [UInt8])]
    /// Milliseconds since the epoch, when the broker gives one.
    public var timestampMs: Int64?

    /// `timestampMs` as a date: when the message entered its topic (its
    /// producer's create time, or the broker's append time).
    public var queuedAt: Date? { timestampMs.map { Date(timeIntervalSince1970: Double($0) / 1000) } }

    public var keyString: String? { key.map { String(decoding: $0, as: UTF8.self) } }

    public func header(_ name: String) -> String? {
        headers.first { $0.0 == name }.map { String(decoding: $0.1, as: UTF8.self) }
    }

    public init(topic: String, partition: Int32, offset: Int64, key: [UInt8]?, value: [UInt8],
                headers: [(String, [UInt8])] = [], timestampMs: Int64? = nil) {
        self.topic = topic; self.partition = partition; self.offset = offset
        self.key = key; self.value = value; self.headers = headers; self.timestampMs = timestampMs
    }

    init(copying m: UnsafeMutablePointer<rd_kafka_message_t>) {
        let msg = m.pointee
        topic = String(cString: rd_kafka_topic_name(msg.rkt))
        partition = msg.partition
        offset = msg.offset
        key = msg.key.map { Array(UnsafeRawBufferPointer(start: $0, count: msg.key_len)) }
        value = msg.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: msg.len)) } ?? []
        var tsType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let ts = rd_kafka_message_timestamp(m, &tsType)
        timestampMs = tsType == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? nil : ts
        var result: [(String, [UInt8])] = []
        var hdrs: OpaquePointer?
        if rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR, let hdrs {
            var index = 0
            var name: UnsafePointer<CChar>?
            var value: UnsafeRawPointer?
            var size = 0
            while rd_kafka_header_get_all(hdrs, index, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
                let bytes = value.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
                result.append((name.map { String(cString: $0) } ?? "", bytes))
                index += 1
            }
        }
        headers = result
    }
}

/// A topic partition.
public struct TopicPartition: Sendable, Hashable, CustomStringConvertible {
    public var topic: String
    public var partition: Int32
    public init(topic: String, partition: Int32) { self.topic = topic; self.partition = partition }
    public var description: String { "\(topic)/\(partition)" }
}

/// A topic partition and an offset in it, with the metadata string a commit
/// may carry (Kafka keeps it with the committed offset; brokers cap it,
/// 4096 bytes by default, `offset.metadata.max.bytes`).
public struct TopicPartitionOffset: Sendable, Hashable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
    public var metadata: String?
    public init(topic: String, partition: Int32, offset: Int64, metadata: String? = nil) {
        self.topic = topic; self.partition = partition; self.offset = offset; self.metadata = metadata
    }

    public var topicPartition: TopicPartition { TopicPartition(topic: topic, partition: partition) }
}

extension UnsafeMutablePointer where Pointee == rd_kafka_topic_partition_t {
    /// Sets the element's metadata to a copy librdkafka owns (it frees it with the list).
    func setMetadata(_ text: String?) {
        guard let text else { return }
        let bytes = Array(text.utf8)
        guard let copy = malloc(Swift.max(1, bytes.count)) else { return }
        bytes.withUnsafeBytes { if let base = $0.baseAddress { copy.copyMemory(from: base, byteCount: bytes.count) } }
        pointee.metadata = copy
        pointee.metadata_size = bytes.count
    }
}
