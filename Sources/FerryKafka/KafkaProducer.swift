import CRdKafka
import FerryCore
import Foundation
import Logging
import Synchronization
import FerryConcurrency

/// A librdkafka producer. `send` returns when the broker has acknowledged the
/// message (its delivery report), so callers know it is durable.
public final class KafkaProducer: Sendable {
    private let handle: KafkaHandle
    private let poller: PollThread
    private let bootstrapServers: String

    public init(configuration: KafkaConfiguration, logger: Logger) throws(KafkaError) {
        var configuration = configuration
        // Acknowledged by all in-sync replicas, without duplicates from retries.
        if configuration["enable.idempotence"] == nil { configuration["enable.idempotence"] = "true" }
        if configuration["linger.ms"] == nil { configuration["linger.ms"] = "2" }
        bootstrapServers = configuration["bootstrap.servers"] ?? ""
        let conf = try configuration.makeNative(for: .producer)
        rd_kafka_conf_set_dr_msg_cb(conf, deliveryReportCallback)
        handle = try KafkaHandle(type: RD_KAFKA_PRODUCER, conf: conf, logger: logger)
        let handle = self.handle
        poller = PollThread(name: "ferry-kafka-producer") { _ = rd_kafka_poll(handle.rk, 100) }
    }

    /// Sends one message and waits for its delivery report. `timestampMs`
    /// sets the message's create time (default: now).
    public func send(topic: String, key: [UInt8]?, value: [UInt8], headers: [(String, String)] = [],
                     timestampMs: Int64? = nil) async throws(KafkaError) {
        let result: Result<Void, KafkaError> = await withCheckedContinuation { continuation in
            postReporting(topic: topic, key: key, value: value, headers: headers, timestampMs: timestampMs) {
                continuation.resume(returning: $0.map { _ in () })
            }
        }
        try result.mapError(explained).get()
    }

    /// Queues one message without waiting; `onDelivery` gets its delivery report.
    /// Messages posted in order to one partition are delivered in that order.
    public func post(topic: String, key: [UInt8]?, value: [UInt8], headers: [(String, String)] = [],
                     onDelivery: @escaping @Sendable (Result<Void, KafkaError>) -> Void) {
        postReporting(topic: topic, key: key, value: value, headers: headers) { onDelivery($0.map { _ in () }) }
    }

    /// Sends one message and returns where the broker stored it.
    public func sendReturningPosition(topic: String, key: [UInt8]?, value: [UInt8],
                                      headers: [(String, String)] = []) async throws(KafkaError) -> KafkaPosition {
        let result: Result<KafkaPosition, KafkaError> = await withCheckedContinuation { continuation in
            postReporting(topic: topic, key: key, value: value, headers: headers) { continuation.resume(returning: $0) }
        }
        return try result.mapError(explained).get()
    }

    private func explained(_ error: KafkaError) -> KafkaError {
        handle.log.explain(error, brokers: bootstrapServers)
    }

    private func postReporting(topic: String, key: [UInt8]?, value: [UInt8], headers: [(String, String)], timestampMs: Int64? = nil,
                               onDelivery: @escaping @Sendable (Result<KafkaPosition, KafkaError>) -> Void) {
        let box = Unmanaged.passRetained(DeliveryBox(onDelivery))
        if let error = enqueue(topic: topic, key: key, value: value, headers: headers, timestampMs: timestampMs, opaque: box.toOpaque()) {
            box.release()
            onDelivery(.failure(error))
        }
    }

    public func send(topic: String, key: String?, value: [UInt8], headers: [(String, String)] = []) async throws(KafkaError) {
        try await send(topic: topic, key: key.map { Array($0.utf8) }, value: value, headers: headers)
    }

    /// Hands all `messages` to librdkafka in order (so messages to one partition
    /// keep it) and waits for every delivery report; one result per message.
    /// Waits at most `timeout` seconds, and not at all once the task is
    /// cancelled: messages without a report by then count as failed
    /// (`deliveryTimedOut`), although librdkafka may still deliver them.
    public func sendAll(_ messages: [OutgoingMessage], timeout: Double = 30) async -> [Result<Void, KafkaError>] {
        guard !messages.isEmpty else { return [] }
        let collector = ResultCollector(count: messages.count)
        let timer = DeadlineTimer.start(after: timeout) { collector.expire(with: .deliveryTimedOut(timeout)) }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                collector.onComplete { continuation.resume(returning: $0) }
                for (index, message) in messages.enumerated() {
                    post(topic: message.topic, key: message.key, value: message.value, headers: message.headers) {
                        collector.set(index, $0)
                    }
                }
            }
        } onCancel: {
            collector.expire(with: .deliveryTimedOut(0))
        }
    }

    /// Waits up to `timeoutMs` for every queued message to be delivered.
    public func flush(timeoutMs: Int32 = 10_000) {
        rd_kafka_flush(handle.rk, timeoutMs)
    }

    /// `flush` from async code: the wait runs on the blocking pool.
    public func flush(timeoutMs: Int32 = 10_000) async {
        let handle = self.handle
        _ = await BlockingPool.shared.run { rd_kafka_flush(handle.rk, timeoutMs).rawValue }
    }

    /// The cluster's id from the brokers' metadata (waiting up to `timeoutMs`
    /// for it); nil when no broker answered.
    public func clusterId(timeoutMs: Int32 = 5_000) async -> String? {
        let handle = self.handle
        return await BlockingPool.shared.run { () -> String? in
            guard let id = rd_kafka_clusterid(handle.rk, timeoutMs) else { return nil }
            defer { rd_kafka_mem_free(handle.rk, id) }
            return String(cString: id)
        }
    }

    /// Each partition's log start and end of `topic` (low and high
    /// watermarks), asked of the leaders off the cooperative pool.
    public func watermarks(of topic: String) async throws(KafkaError) -> [Int32: (start: Int64, end: Int64)] {
        let handle = self.handle
        let result = await BlockingPool.shared.run {
            Result { () throws(KafkaError) -> [Int32: (start: Int64, end: Int64)] in
                var marks: [Int32: (start: Int64, end: Int64)] = [:]
                for partition in try KafkaConsumer.partitionIds(rk: handle.rk, topic: topic) {
                    var low: Int64 = -1, high: Int64 = -1
                    let err = rd_kafka_query_watermark_offsets(handle.rk, topic, partition, &low, &high, 10_000)
                    guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err, context: "watermarks of \(topic)/\(partition)") }
                    marks[partition] = (low, high)
                }
                return marks
            }
        }
        return try result.get()
    }

    /// Hands the message to librdkafka, which copies key and value; an empty value goes as null (a tombstone).
    private func enqueue(topic: String, key: [UInt8]?, value: [UInt8], headers: [(String, String)], timestampMs: Int64?,
                         opaque: UnsafeMutableRawPointer) -> KafkaError? {
        let nativeHeaders = rd_kafka_headers_new(headers.count)
        for (name, v) in headers {
            rd_kafka_header_add(nativeHeaders, name, -1, v, v.utf8.count)
        }
        return topic.withCString { topicName in
            value.withUnsafeBytes { valueBytes in
                (key ?? []).withUnsafeBytes { keyBytes in
                    var vus = [rd_kafka_vu_t](repeating: rd_kafka_vu_t(), count: 5)
                    vus[0].vtype = RD_KAFKA_VTYPE_TOPIC
                    vus[0].u.cstr = topicName
                    vus[1].vtype = RD_KAFKA_VTYPE_VALUE
                    // An empty value is produced as null: a tombstone on a compacted topic.
                    vus[1].u.mem.ptr = value.isEmpty ? nil : UnsafeMutableRawPointer(mutating: valueBytes.baseAddress)
                    vus[1].u.mem.size = valueBytes.count
                    vus[2].vtype = RD_KAFKA_VTYPE_MSGFLAGS
                    vus[2].u.i = RD_KAFKA_MSG_F_COPY
                    vus[3].vtype = RD_KAFKA_VTYPE_OPAQUE
                    vus[3].u.ptr = opaque
                    vus[4].vtype = RD_KAFKA_VTYPE_HEADERS
                    vus[4].u.headers = nativeHeaders
                    if key != nil {
                        var k = rd_kafka_vu_t()
                        k.vtype = RD_KAFKA_VTYPE_KEY
                        k.u.mem.ptr = UnsafeMutableRawPointer(mutating: keyBytes.baseAddress)
                        k.u.mem.size = keyBytes.count
                        vus.append(k)
                    }
                    if let timestampMs {
                        var t = rd_kafka_vu_t()
                        t.vtype = RD_KAFKA_VTYPE_TIMESTAMP
                        t.u.i64 = timestampMs
                        vus.append(t)
                    }
                    guard let error = rd_kafka_produceva(handle.rk, vus, vus.count) else { return nil }
                    // On failure the headers were not taken over.
                    rd_kafka_headers_destroy(nativeHeaders)
                    let result = KafkaError(rd_kafka_error_code(error), context: "produce to \(topic)")
                    rd_kafka_error_destroy(error)
                    return result
                }
            }
        }
    }

    deinit {
        rd_kafka_flush(handle.rk, 5_000)
        poller.stop()
    }
}

/// A message for `sendAll`.
public struct OutgoingMessage: Sendable {
    public var topic: String
    public var key: [UInt8]?
    public var value: [UInt8]
    public var headers: [(String, String)]
    public init(topic: String, key: [UInt8]?, value: [UInt8], headers: [(String, String)] = []) {
        self.topic = topic; self.key = key; self.value = value; self.headers = headers
    }
}

/// Gathers delivery results and calls back once all are in.
private final class ResultCollector: Sendable {
    private struct State {
        var results: [Result<Void, KafkaError>?]
        var remaining: Int
        var done: (@Sendable ([Result<Void, KafkaError>]) -> Void)?
        /// Results are final (all in, or expired): later reports are ignored.
        var closed = false
        /// `expire` came before `onComplete`.
        var expiredEarly: KafkaError?
    }
    private let state: Mutex<State>

    init(count: Int) { state = Mutex(State(results: Array(repeating: nil, count: count), remaining: count)) }

    func onComplete(_ done: @escaping @Sendable ([Result<Void, KafkaError>]) -> Void) {
        let early: [Result<Void, KafkaError>]? = state.withLock { s in
            s.done = done
            guard let error = s.expiredEarly else { return nil }
            s.closed = true
            return s.results.map { $0 ?? .failure(error) }
        }
        if let early { done(early) }
    }

    func set(_ index: Int, _ result: Result<Void, KafkaError>) {
        let finished: (([Result<Void, KafkaError>]) -> Void, [Result<Void, KafkaError>])? = state.withLock { s in
            guard !s.closed, s.results[index] == nil else { return nil }
            s.results[index] = result
            s.remaining -= 1
            guard s.remaining == 0, let done = s.done else { return nil }
            s.closed = true
            return (done, s.results.map { $0! })
        }
        if let (done, results) = finished { done(results) }
    }

    /// Ends the wait now: messages without a report fail with `error`.
    func expire(with error: KafkaError) {
        let finished: (([Result<Void, KafkaError>]) -> Void, [Result<Void, KafkaError>])? = state.withLock { s in
            guard !s.closed else { return nil }
            guard let done = s.done else {
                s.expiredEarly = s.expiredEarly ?? error
                return nil
            }
            s.closed = true
            return (done, s.results.map { $0 ?? .failure(error) })
        }
        if let (done, results) = finished { done(results) }
    }
}

/// Where a delivered message is.
public struct KafkaPosition: Sendable, Hashable {
    public var partition: Int32
    public var offset: Int64
    public init(partition: Int32, offset: Int64) { self.partition = partition; self.offset = offset }
}

/// Carries a delivery callback through librdkafka's per-message opaque.
private final class DeliveryBox {
    let onDelivery: @Sendable (Result<KafkaPosition, KafkaError>) -> Void
    init(_ onDelivery: @escaping @Sendable (Result<KafkaPosition, KafkaError>) -> Void) { self.onDelivery = onDelivery }
}

private let deliveryReportCallback: @convention(c) (OpaquePointer?, UnsafePointer<rd_kafka_message_t>?, UnsafeMutableRawPointer?) -> Void = { _, message, _ in
    guard let message, let opaque = message.pointee._private else { return }
    let box = Unmanaged<DeliveryBox>.fromOpaque(opaque).takeRetainedValue()
    let err = message.pointee.err
    if err == RD_KAFKA_RESP_ERR_NO_ERROR {
        box.onDelivery(.success(KafkaPosition(partition: message.pointee.partition, offset: message.pointee.offset)))
    } else {
        let topic = message.pointee.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? "?"
        box.onDelivery(.failure(KafkaError(err, context: "delivery to \(topic)")))
    }
}
