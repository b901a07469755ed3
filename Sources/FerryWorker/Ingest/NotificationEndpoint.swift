import FerryCore
import FerryKafka
import Foundation
import Logging
import Metrics

/// `POST /notifications/s3`: where a store pushes its bucket notifications
/// (Ceph RGW push endpoint, MinIO webhook target, AWS through SNS). Only a
/// caller with the ingest token is heard: `Authorization: Bearer <token>`
/// (MinIO's `auth_token`), or `?token=<token>` in the URL for stores that
/// cannot send headers (RGW). A payload that decodes is written, as it came,
/// to `<prefix>.ingest`; the 2xx is sent only after Kafka acknowledged it, so
/// an acknowledged notification survives any restart of the worker. One that
/// names a bucket outside `buckets` is refused whole (403), so a holder of
/// the token cannot have Ferry announce objects of a bucket it does not serve.
public final class NotificationEndpoint: Sendable {
    private let token: String
    private let buckets: Set<String>
    private let producer: KafkaProducer
    private let topic: String
    private let logger: Logger

    public init(token: String, buckets: Set<String>, producer: KafkaProducer, topics: Topics, logger: Logger) {
        self.token = token
        self.buckets = buckets
        self.producer = producer
        self.topic = topics.ingest
        self.logger = logger
    }

    func receive(uri: String, authorization: String?, body: [UInt8], peer: String) async -> AdminRouter.Response {
        let query = URLComponents(string: uri)?.queryItems?.first { $0.name == "token" }?.value
        let bearer = authorization.flatMap { $0.lowercased().hasPrefix("bearer ") ? String($0.dropFirst(7)) : nil }
        guard let offered = bearer ?? query, ConstantTime.equal(Array(offered.utf8), Array(token.utf8)) else {
            logger.warning("refused a notification from \(peer): \(bearer ?? query == nil ? "no" : "a wrong") ingest token; nothing published")
            Counter(label: "ferry_ingest_notifications_total", dimensions: [("outcome", "unauthorized")]).increment()
            var response = AdminRouter.Response.error(401, "notifications need the ingest token (Authorization: Bearer, or ?token=)")
            response.headers["www-authenticate"] = #"Bearer realm="ferry-ingest""#
            return response
        }
        let changes: [StoreNotification]
        do {
            changes = try StoreNotificationDecoder.decode(body)
        } catch {
            logger.warning("refused a notification from \(peer): \(error)")
            Counter(label: "ferry_ingest_notifications_total", dimensions: [("outcome", "malformed")]).increment()
            return .error(error.code == .requestTooLarge ? 413 : 400, error.message)
        }
        guard let first = changes.first else { return .json(200, ["accepted": 0]) }  // a test event or subscription message
        if let foreign = changes.first(where: { !buckets.contains($0.bucket) }) {
            let reason = IngestBuckets.refusal(foreign.bucket)
            logger.warning("refused a notification from \(peer): \(reason); nothing published")
            Counter(label: "ferry_ingest_notifications_total", dimensions: [("outcome", "foreign_bucket")]).increment()
            return .error(403, reason)
        }
        do {
            try await producer.send(topic: topic, key: "\(first.bucket)/\(first.key)", value: body,
                                    headers: [("ferry-received-at", Timestamp.iso8601(Date())), ("ferry-received-from", peer)])
        } catch {
            logger.error("cannot store a notification in \(topic) (the store is asked to send it again): \(error)")
            return .error(503, "the notification could not be stored; send it again")
        }
        Counter(label: "ferry_ingest_notifications_total", dimensions: [("outcome", "accepted")]).increment()
        return .json(200, ["accepted": changes.count])
    }
}

/// The words of a refusal for a bucket outside `ingest.buckets`.
enum IngestBuckets {
    static func refusal(_ bucket: String) -> String {
        "bucket '\(bucket.prefix(80))' is not one this worker takes notifications for (ingest.buckets, --ingest-bucket)"
    }
}
