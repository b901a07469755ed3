import FerryCore
import FerryS3
import FerryStorage
import Foundation

/// An HTTPS callback waiting on `<prefix>.callbacks`: where to POST, and the terminal status to POST.
struct CallbackDelivery: Sendable, Codable, Hashable {
    var url: String
    var status: TransferStatus
}

/// Headers of callback deliveries (on the reply topic, the POST, and the DLQ record).
public enum CallbackHeader {
    public static let transferId = "ferry-transfer-id"
    public static let state = "ferry-state"
    /// `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" with the callback secret>`.
    public static let signature = "ferry-signature"
    /// Names this delivery (topic/partition/offset of its record): the same on every retry, for receivers to deduplicate.
    public static let delivery = "ferry-delivery"
    public static let attempts = "ferry-attempts"
    public static let url = "ferry-callback-url"
}

/// What HTTPS callbacks may reach and how they are signed.
public struct CallbackSettings: Sendable {
    /// The HMAC secret; without it, requests naming an https callback are refused.
    public var secret: String?
    /// The same SSRF rules as https sources: https only, optional host
    /// allow-list, internal addresses refused at connect time unless allowed.
    public var policy = RemoteSourcePolicy()
    /// POSTs per delivery before it is dead-lettered on `<prefix>.callbacks.dlq`.
    public var maxAttempts = 6
    public init() {
        policy.maxBytes = 1 << 20
        policy.timeoutSeconds = 30
        policy.maxRedirects = 0
    }

    /// `t=…,v1=…` for `body` sent at `time`.
    static func signature(secret: String, body: [UInt8], time: Int) -> String {
        let signed = Array("\(time).".utf8) + body
        return "t=\(time),v1=\(Digest.hmacSHA256(key: Array(secret.utf8), signed).hexString)"
    }
}
