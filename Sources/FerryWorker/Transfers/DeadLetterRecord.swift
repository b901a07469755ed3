import FerryCore
import FerryS3
import FerryStorage
import FerryStore
import Foundation

/// A record for `<prefix>.requests.dlq` that always fits the broker's message
/// limit, so every refused message gets one (docs/producers/requests.md).
///
/// The record carries the original key and bytes (secrets redacted in place)
/// and the reason in headers. When key, value and headers together exceed
/// `maxBytes`, the value is cut to what fits and the record says so:
/// `ferry-truncated: true`, `ferry-original-length` (bytes of the redacted
/// value) and `ferry-original-sha256` (hex, of the same bytes). A key longer
/// than `maxKeyBytes` is cut the same way (`ferry-original-key-length`,
/// `ferry-original-key-sha256`), and the error message header is cut to
/// `maxMessageHeaderBytes`.
struct DeadLetterRecord {
    /// Kafka's default limit (`message.max.bytes`, 1,000,000) less room for the
    /// record batch's own framing; lowered when the producer is configured lower.
    static let defaultMaxBytes = 990_000
    static let maxKeyBytes = 4096
    static let maxMessageHeaderBytes = 1024

    /// The largest record for a producer configured with `properties`.
    static func maxBytes(producerProperties properties: [String: String]) -> Int {
        guard let text = properties["message.max.bytes"], let configured = Int(text) else { return defaultMaxBytes }
        return max(4096, min(defaultMaxBytes, configured - 10_000))
    }

    /// `maxBytes` is at least 4096 (`maxBytes(producerProperties:)`); key and
    /// error message take at most a quarter and an eighth of it.
    static func make(topic: String, key: [UInt8]?, value: [UInt8], headers: [OutboxMessage.Header],
                     maxBytes: Int) -> OutboxMessage {
        let messageCap = min(maxMessageHeaderBytes, maxBytes / 8)
        let keyCap = min(maxKeyBytes, maxBytes / 4)
        var headers = headers.map { header -> OutboxMessage.Header in
            guard header.name == DLQHeader.errorMessage, header.value.utf8.count > messageCap else { return header }
            return OutboxMessage.Header(header.name, truncatedText(header.value, to: messageCap))
        }
        var key = key
        if let original = key, original.count > keyCap {
            key = Array(original.prefix(keyCap))
            headers.append(.init(DLQHeader.originalKeyLength, String(original.count)))
            headers.append(.init(DLQHeader.originalKeySHA256, sha256Hex(original)))
        }
        var message = OutboxMessage(topic: topic, key: key, value: value, headers: headers)
        if message.recordBytes > maxBytes {
            message = shrunk(message, toAtMost: maxBytes)
        }
        return message
    }

    /// `message` with its value cut so the whole record is at most `limit`
    /// bytes (and the truncation headers added, once).
    static func shrunk(_ message: OutboxMessage, toAtMost limit: Int) -> OutboxMessage {
        var message = message
        if !message.headers.contains(where: { $0.name == DLQHeader.truncated }) {
            message.headers.append(.init(DLQHeader.truncated, "true"))
            message.headers.append(.init(DLQHeader.originalLength, String(message.value.count)))
            message.headers.append(.init(DLQHeader.originalSHA256, sha256Hex(message.value)))
        }
        let room = max(0, limit - (message.recordBytes - message.value.count))
        if message.value.count > room { message.value = Array(message.value.prefix(room)) }
        return message
    }

    static func sha256Hex(_ bytes: [UInt8]) -> String {
        Digest.sha256(bytes).hexString
    }

    /// At most `limit` bytes of UTF-8, cut on a character boundary, marked with an ellipsis.
    static func truncatedText(_ text: String, to limit: Int) -> String {
        var out = ""
        var used = 0
        for character in text {
            let size = character.utf8.count
            guard used + size <= limit - 3 else { break }
            out.append(character)
            used += size
        }
        return out + "…"
    }
}

extension OutboxMessage {
    /// Key, value and header bytes: what counts against the broker's message limit
    /// (less a few bytes of per-record framing, covered by the limit's margin).
    var recordBytes: Int {
        (key?.count ?? 0) + value.count + headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
    }
}
