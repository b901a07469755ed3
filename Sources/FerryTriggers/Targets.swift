import FerryCore
import FerryTriggerKit
import FerryKafka
import FerryS3
import FerryStorage
import Foundation

/// A trigger declared in configuration (`triggers:` in the worker's file),
/// needing no recompiling: `webhook` POSTs the event JSON to a URL, `kafka`
/// forwards it to a topic. Either takes an S3 source (`events`, `prefix`,
/// `suffix`) or a stream source (`table`, `viewType`), and the same delivery
/// settings as a Swift handler's registration.
public struct TargetDeclaration: Sendable, Codable, Hashable {
    public var name: String
    /// `webhook` or `kafka`.
    public var type: String
    public var url: String?
    public var headers: [String: String]?
    public var topic: String?
    // S3 source
    public var events: [String]?
    public var prefix: String?
    public var suffix: String?
    // Stream source
    public var table: String?
    public var viewType: String?
    public var batchSize: Int?
    public var maximumBatchingWindowSeconds: Double?
    public var maximumRecordAgeSeconds: Double?
    public var bisectBatchOnFunctionError: Bool?
    public var onFailureDestination: String?
    public var filters: [String]?
    /// `TRIM_HORIZON` (default) or `LATEST`.
    public var startingPosition: String?
    // Delivery (both)
    public var maximumRetryAttempts: Int?
    public var maximumEventAgeSeconds: Double?
    public var timeoutSeconds: Double?
    public var maximumConcurrency: Int?
    /// Wait before the first retry, doubled for each further one (Ferry's; Lambda waits 60 s, then 120 s).
    public var retryDelaySeconds: Double?

    public init(name: String, type: String, url: String? = nil, headers: [String: String]? = nil, topic: String? = nil,
                events: [String]? = nil, prefix: String? = nil, suffix: String? = nil, table: String? = nil, viewType: String? = nil,
                batchSize: Int? = nil, maximumBatchingWindowSeconds: Double? = nil, maximumRecordAgeSeconds: Double? = nil,
                bisectBatchOnFunctionError: Bool? = nil, onFailureDestination: String? = nil, filters: [String]? = nil,
                maximumRetryAttempts: Int? = nil, maximumEventAgeSeconds: Double? = nil, timeoutSeconds: Double? = nil,
                maximumConcurrency: Int? = nil, startingPosition: String? = nil, retryDelaySeconds: Double? = nil) {
        self.startingPosition = startingPosition; self.retryDelaySeconds = retryDelaySeconds
        self.name = name; self.type = type; self.url = url; self.headers = headers; self.topic = topic
        self.events = events; self.prefix = prefix; self.suffix = suffix; self.table = table; self.viewType = viewType
        self.batchSize = batchSize; self.maximumBatchingWindowSeconds = maximumBatchingWindowSeconds
        self.maximumRecordAgeSeconds = maximumRecordAgeSeconds; self.bisectBatchOnFunctionError = bisectBatchOnFunctionError
        self.onFailureDestination = onFailureDestination; self.filters = filters; self.maximumRetryAttempts = maximumRetryAttempts
        self.maximumEventAgeSeconds = maximumEventAgeSeconds; self.timeoutSeconds = timeoutSeconds; self.maximumConcurrency = maximumConcurrency
    }

    /// Why the delivery settings cannot stand, if they cannot: a value outside
    /// Lambda's range for it, or a setting of the other kind of source. Refused
    /// rather than clamped or ignored, so what runs is what was written.
    func settingProblem() -> String? {
        let stream = table != nil
        let misplaced = stream
            ? [("maximumEventAgeSeconds", maximumEventAgeSeconds != nil), ("prefix", prefix != nil), ("suffix", suffix != nil)]
            : [("batchSize", batchSize != nil), ("maximumBatchingWindowSeconds", maximumBatchingWindowSeconds != nil),
               ("maximumRecordAgeSeconds", maximumRecordAgeSeconds != nil), ("bisectBatchOnFunctionError", bisectBatchOnFunctionError != nil),
               ("onFailureDestination", onFailureDestination != nil), ("filters", filters != nil), ("viewType", viewType != nil),
               ("startingPosition", startingPosition != nil)]
        if let key = misplaced.first(where: \.1)?.0 {
            return "\(key) applies to \(stream ? "S3 sources (events)" : "stream sources (table)") only"
        }
        if let startingPosition, StartingPosition(rawValue: startingPosition) == nil {
            return "startingPosition must be \(StartingPosition.allCases.map(\.rawValue).joined(separator: " or ")), got '\(startingPosition)'"
        }
        func outside(_ key: String, _ value: Double?, _ range: String, _ allowed: (Double) -> Bool) -> String? {
            guard let value, !(value.isFinite && allowed(value)) else { return nil }
            let shown = value.rounded() == value && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
            return "\(key) must be \(range), got \(shown)"
        }
        return [
            outside("batchSize", batchSize.map(Double.init), "1…10000") { (1...10_000).contains($0) },
            outside("maximumBatchingWindowSeconds", maximumBatchingWindowSeconds, "0…300") { (0...300).contains($0) },
            outside("maximumRecordAgeSeconds", maximumRecordAgeSeconds, "-1 (no limit) or 60…604800") { $0 == -1 || (60...604_800).contains($0) },
            stream ? outside("maximumRetryAttempts", maximumRetryAttempts.map(Double.init), "-1 (until the records expire) or 0…10000") {
                $0 == -1 || (0...10_000).contains($0)
            } : outside("maximumRetryAttempts", maximumRetryAttempts.map(Double.init), "0…2") { (0...2).contains($0) },
            outside("maximumEventAgeSeconds", maximumEventAgeSeconds, "60…21600") { (60...21_600).contains($0) },
            outside("timeoutSeconds", timeoutSeconds, "1…900") { (1...900).contains($0) },
            outside("maximumConcurrency", maximumConcurrency.map(Double.init), "1…1000") { (1...1_000).contains($0) },
            outside("retryDelaySeconds", retryDelaySeconds, "0…300") { (0...300).contains($0) },
        ].lazy.compactMap { $0 }.first
    }

    /// Adds the declared trigger to `registry`; a declaration that cannot work is an error naming it.
    public func register(into registry: inout TriggerRegistry, http: CurlTransport) throws(TriggerRegistrationError) {
        let target: any S3EventHandler & StreamRecordHandler
        switch type {
        case "webhook":
            guard let url, let parsed = URLComponents(string: url), ["http", "https"].contains(parsed.scheme ?? "") else {
                throw TriggerRegistrationError("target '\(name)': a webhook needs an http(s) url")
            }
            // Refused here, where the file is read, not at each invocation.
            for (header, value) in headers ?? [:] {
                if let problem = CurlTransport.headerLineProblem(name: header, value: value) {
                    throw TriggerRegistrationError("target '\(name)': \(problem)")
                }
            }
            target = WebhookTarget(url: url, headers: headers ?? [:], http: http)
        case "kafka":
            guard let topic, !topic.isEmpty else { throw TriggerRegistrationError("target '\(name)': a kafka target needs a topic") }
            target = KafkaForwardTarget(topic: topic)
        default:
            throw TriggerRegistrationError("target '\(name)': unknown type '\(type)' (webhook or kafka)")
        }
        if let problem = settingProblem() { throw TriggerRegistrationError("target '\(name)': \(problem)") }
        switch (events, table) {
        case (let events?, nil):
            try registry.register(S3TriggerRegistration(
                name: name, events: events.map { EventTypePattern($0) }, prefix: prefix ?? "", suffix: suffix ?? "",
                delivery: AsyncDelivery(maximumRetryAttempts: maximumRetryAttempts ?? 2, retryDelaySeconds: retryDelaySeconds ?? 1,
                                        timeoutSeconds: timeoutSeconds ?? 30,
                                        maximumEventAgeSeconds: maximumEventAgeSeconds ?? 21_600, maximumConcurrency: maximumConcurrency),
                handler: target))
        case (nil, let table?):
            let view: StreamViewType
            if let viewType {
                guard let known = StreamViewType(rawValue: viewType) else {
                    throw TriggerRegistrationError("target '\(name)': unknown viewType '\(viewType)' "
                        + "(\(StreamViewType.allCases.map(\.rawValue).joined(separator: ", ")))")
                }
                view = known
            } else {
                view = .newAndOldImages
            }
            try registry.register(StreamTriggerRegistration(
                name: name, table: table, viewType: view,
                mapping: EventSourceMapping(batchSize: batchSize ?? 100, maximumBatchingWindowSeconds: maximumBatchingWindowSeconds ?? 0,
                                            maximumRetryAttempts: maximumRetryAttempts ?? -1, maximumRecordAgeSeconds: maximumRecordAgeSeconds ?? -1,
                                            bisectBatchOnFunctionError: bisectBatchOnFunctionError ?? false,
                                            reportBatchItemFailures: type == "webhook", onFailureDestination: onFailureDestination,
                                            filterCriteria: try FilterCriteria(patterns: filters ?? []), retryDelaySeconds: retryDelaySeconds ?? 1,
                                            timeoutSeconds: timeoutSeconds ?? 30, maximumConcurrency: maximumConcurrency,
                                            startingPosition: startingPosition.flatMap(StartingPosition.init) ?? .trimHorizon),
                handler: target))
        default:
            throw TriggerRegistrationError("target '\(name)': give either 'events' (an S3 source) or 'table' (a stream source)")
        }
    }
}

/// POSTs the event JSON to a URL. A 2xx answer is success; for a stream
/// batch, a JSON body with `batchItemFailures` reports failed records. Any
/// other answer, or no answer, fails the invocation (retried as configured).
public struct WebhookTarget: S3EventHandler, StreamRecordHandler {
    public var url: String
    public var headers: [String: String]
    let http: CurlTransport

    public init(url: String, headers: [String: String] = [:], http: CurlTransport) {
        self.url = url; self.headers = headers; self.http = http
    }

    public func handle(_ event: S3Event, context: TriggerContext) async throws {
        _ = try await post(event, context: context)
    }

    public func handle(_ event: DynamoDBEvent, context: TriggerContext) async throws -> StreamBatchResponse {
        try Self.batchResponse(from: try await post(event, context: context))
    }

    /// A stream batch's answer, by Lambda's rules: no body, a body that is not
    /// a JSON object (`OK`), or an object without a `batchItemFailures` list
    /// (or with null or an empty one) is success; a list whose entries are not
    /// each an object with a non-empty string `itemIdentifier` (null, empty,
    /// misnamed) fails the whole batch, as does an object that names a member
    /// twice. (Such answers were taken for success, so records the handler
    /// said had failed were checkpointed.)
    static func batchResponse(from body: [UInt8]) throws -> StreamBatchResponse {
        guard !body.isEmpty, let object = try? FoundationJSON.object(body) as? [String: Any] else { return .success }
        if let problem = StrictJSON.check(body) { throw InvalidBatchResponse(reason: "\(problem)") }
        guard let list = object["batchItemFailures"], !(list is NSNull) else { return .success }
        guard let entries = list as? [Any] else { throw InvalidBatchResponse(reason: "batchItemFailures is not a list") }
        var failures: [StreamBatchResponse.Failure] = []
        for (index, entry) in entries.enumerated() {
            guard let identifier = (entry as? [String: Any])?["itemIdentifier"] as? String, !identifier.isEmpty else {
                throw InvalidBatchResponse(reason: "batchItemFailures[\(index)] has no itemIdentifier that is a non-empty string")
            }
            failures.append(.init(itemIdentifier: identifier))
        }
        return StreamBatchResponse(batchItemFailures: failures)
    }

    private func post<T: Encodable>(_ event: T, context: TriggerContext) async throws -> [UInt8] {
        var requestHeaders = [("Content-Type", "application/json"), ("X-Ferry-Request-Id", context.requestId),
                              ("X-Ferry-Attempt", String(context.attempt)), ("X-Ferry-Trigger", context.handlerName)]
        requestHeaders += headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        // The bytes of the events topic and every other target (FerryJSON).
        let body = try FerryJSON.encode(event)
        let response: HTTPResponse
        do {
            response = try await http.execute(HTTPRequest(method: "POST", url: url, headers: requestHeaders, body: .bytes(body)))
        } catch {
            // The transport's message names the URL: only its origin goes on.
            throw FerryError(error.code, error.message.replacingOccurrences(of: redactedURL(url), with: origin))
        }
        guard (200..<300).contains(response.status) else {
            throw WebhookRefused(url: origin, status: response.status, body: String(decoding: response.body.prefix(200), as: UTF8.self))
        }
        return response.body
    }

    /// What failures say of the URL: scheme, host and port. Its user info, path
    /// and query stay out of logs and invocation records, which travel further
    /// than the configuration: webhook URLs carry secrets there (a password,
    /// a path token such as a chat service's `…/services/T0/B0/XXXX`, `?token=`).
    var origin: String {
        guard let parts = URLComponents(string: url), let scheme = parts.scheme, let host = parts.host else { return "<webhook>" }
        return "\(scheme)://\(host.contains(":") ? "[\(host)]" : host)\(parts.port.map { ":\($0)" } ?? "")"
    }
}

/// A webhook answered with something other than 2xx.
public struct WebhookRefused: Error, CustomStringConvertible {
    /// The webhook's origin (`WebhookTarget.origin`), not its whole URL.
    public var url: String
    public var status: Int
    public var body: String
    public var description: String { "webhook \(url) answered HTTP \(status): \(body)" }
}

/// Forwards the event JSON to a Kafka topic: keyed `bucket/key` for S3
/// events; one message per record, keyed by table and item key, for streams.
public struct KafkaForwardTarget: S3EventHandler, StreamRecordHandler {
    public var topic: String

    public init(topic: String) { self.topic = topic }

    public func handle(_ event: S3Event, context: TriggerContext) async throws {
        let messages = try messages(context)
        let key = event.records.first.map { "\($0.s3.bucket.name)/\($0.s3.object.decodedKey)" }
        try await messages.send(topic: topic, key: key.map { Array($0.utf8) }, value: try FerryJSON.encode(event))
    }

    public func handle(_ event: DynamoDBEvent, context: TriggerContext) async throws -> StreamBatchResponse {
        let messages = try messages(context)
        for record in event.records {
            try await messages.send(topic: topic, key: Array(record.kafkaKey.utf8), value: try FerryJSON.encode(record))
        }
        return .success
    }

    private func messages(_ context: TriggerContext) throws -> any MessageSender {
        guard let producer = context.messages else {
            throw TriggerRegistrationError("kafka target: this context sends no Kafka messages (a worker's does; `ferry triggers test` prints what it would send)")
        }
        return producer
    }
}

/// A webhook's answer to a stream batch that Lambda would not take as a
/// partial-batch response: the whole batch failed.
public struct InvalidBatchResponse: Error, CustomStringConvertible {
    public var reason: String
    public var description: String { "invalid batch response: \(reason)" }
}
