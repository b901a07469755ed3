@_exported import FerryCore
import FerryCore
import FerryKafka
import Foundation
import Logging

/// A producer's view of Ferry: enqueue transfer requests and follow their statuses.
public final class TransferClient: Sendable {
    private let kafka: KafkaConfiguration
    private let topics: Topics
    private let producer: KafkaProducer
    private let logger: Logger

    /// `deliveryTimeout`: how long a send waits for Kafka to take a message
    /// (librdkafka's `message.timeout.ms`, 5 minutes by default) unless
    /// `properties` sets it; it applies to the producer only.
    public init(bootstrapServers: String, properties: [String: String] = [:], topics: Topics = Topics(),
                deliveryTimeout: Duration? = nil, logger: Logger) throws(KafkaError) {
        kafka = KafkaConfiguration(bootstrapServers: bootstrapServers, properties)
        self.topics = topics
        self.logger = logger
        producer = try KafkaProducer(configuration: deliveryTimeout.map(kafka.withDeliveryTimeout) ?? kafka, logger: logger)
    }

    /// Sends `request` to `<prefix>.requests` keyed by `bucket/key` and waits for Kafka's acknowledgement.
    /// The request is first checked against the rules a worker applies when it
    /// decodes one (docs/producers/requests.md): one that breaks them throws
    /// `TransferClientError.invalidRequest` and is not sent. Kafka's refusals
    /// throw `KafkaError`. Never traps, whatever the request holds.
    public func enqueue(_ request: TransferRequest) async throws {
        let value = try Self.encoded(request)
        try await producer.send(topic: topics.requests, key: request.kafkaKey, value: value)
    }

    /// Sends prepared bytes (an item request) and waits for Kafka's acknowledgement.
    func producerSend(topic: String, key: String, value: [UInt8]) async throws(KafkaError) {
        try await producer.send(topic: topic, key: key, value: value)
    }

    /// Uploads `bytes` without a shared filesystem (TransferUtility's
    /// `uploadData`): they go to `<prefix>.uploads` as chunks of at most
    /// 512 KiB, then `request` is enqueued with a `kafka-chunks://` source that
    /// names them (a claim check, valid as long as the topic keeps them).
    /// `request` is an upload whose `source` is replaced; returns the request
    /// as sent. Up to 5 GiB.
    @discardableResult
    public func uploadData(_ bytes: [UInt8], _ request: TransferRequest,
                           chunkSize: Int = ChunkedSource.maxChunkBytes) async throws -> TransferRequest {
        guard request.op == .upload else { throw TransferClientError.invalidRequest(FerryError(.invalidRequest, "uploadData needs an upload request")) }
        guard Int64(bytes.count) <= ChunkedSource.maxBytes, (1...ChunkedSource.maxChunkBytes).contains(chunkSize) else {
            throw TransferClientError.invalidRequest(FerryError(.requestTooLarge, "uploadData takes up to \(ChunkedSource.maxBytes) bytes in chunks of 1…\(ChunkedSource.maxChunkBytes)"))
        }
        let count = (bytes.count + chunkSize - 1) / chunkSize
        let topic = topics.uploads
        let embedded = EmbeddedKafkaCluster.isEmbedded(clusterId: await producer.clusterId() ?? "")
        if embedded { try await requireRoomOnEmbeddedCluster(for: bytes.count, topic: topic) }
        // Chunks go out in parallel (each to the partition its key hashes to); positions come back in order.
        let positions = try await withThrowingTaskGroup(of: (Int, KafkaPosition).self) { group in
            var positions = [ChunkedSource.Position](repeating: .init(partition: 0, offset: 0), count: count)
            var next = 0
            func start() {
                let index = next
                next += 1
                let chunk = Array(bytes[(index * chunkSize)..<min((index + 1) * chunkSize, bytes.count)])
                group.addTask { [producer] in
                    (index, try await producer.sendReturningPosition(topic: topic, key: Array(ChunkedSource.key(transferId: request.id, index: index).utf8),
                                                                     value: chunk))
                }
            }
            while next < min(count, 16) { start() }
            while let (index, position) = try await group.next() {
                positions[index] = .init(partition: position.partition, offset: position.offset)
                if next < count { start() }
            }
            return positions
        }
        if embedded { try await requireChunksKept(positions, topic: topic, request: request) }
        let digest = SHA256Hex.of(bytes)
        var sent = request
        sent.source = ChunkedSource(topic: topic, size: Int64(bytes.count), sha256: digest, chunkSize: chunkSize, positions: positions).uri
        try await enqueue(sent)
        return sent
    }

    /// The embedded cluster keeps `EmbeddedKafkaCluster.bytesKeptPerPartition`
    /// of each partition: chunks of more than the whole topic keeps cannot all
    /// be there when a worker reads them, so none is sent.
    private func requireRoomOnEmbeddedCluster(for size: Int, topic: String) async throws {
        let partitions = try await producer.watermarks(of: topic).count
        let room = partitions * EmbeddedKafkaCluster.bytesKeptPerPartition
        guard size > room else { return }
        throw TransferClientError.invalidRequest(FerryError(.requestTooLarge, "\(size) bytes do not fit the embedded Kafka cluster, which keeps \(EmbeddedKafkaCluster.bytesKeptPerPartition >> 20) MiB of each of \(topic)'s \(partitions) partitions (\(room >> 20) MiB in all); upload from a file:// source or use a real Kafka"))
    }

    /// After the chunks are sent: a chunk the embedded cluster dropped already
    /// (its partition's log now starts past it) makes the claim check unreadable,
    /// so the request is not enqueued.
    private func requireChunksKept(_ positions: [ChunkedSource.Position], topic: String, request: TransferRequest) async throws {
        let starts = try await producer.watermarks(of: topic)
        let dropped = positions.filter { $0.offset < (starts[$0.partition]?.start ?? 0) }.count
        guard dropped > 0 else { return }
        throw TransferClientError.invalidRequest(FerryError(.requestTooLarge, "\(dropped) of the \(positions.count) chunks of upload \(request.id) were dropped by the embedded Kafka cluster (it keeps \(EmbeddedKafkaCluster.bytesKeptPerPartition >> 20) MiB of each partition of \(topic)) before the request was sent; it was not enqueued. Upload from a file:// source, send less at once, or use a real Kafka"))
    }

    /// The request as a worker reads it, or `TransferClientError.invalidRequest`.
    static func encoded(_ request: TransferRequest) throws(TransferClientError) -> [UInt8] {
        if let problem = RequestDecoder.validate(request) { throw .invalidRequest(problem) }
        let value: [UInt8]
        do {
            value = try FerryJSON.encode(request)
        } catch {
            throw .invalidRequest(FerryError(.invalidRequest, "cannot encode the request: \(error)"))
        }
        guard value.count <= RequestLimits.maxMessageBytes else {
            throw .invalidRequest(FerryError(.requestTooLarge, "request is \(value.count) bytes; the limit is \(RequestLimits.maxMessageBytes)"))
        }
        return value
    }

    /// Enqueues `request` and returns its statuses as they arrive, ending after
    /// the terminal one. Statuses are read from the end of `<prefix>.status` as
    /// it was before the request was sent, so none is missed. Throws as `enqueue` does.
    public func enqueueAndFollow(_ request: TransferRequest) async throws -> AsyncStream<TransferStatus> {
        _ = try Self.encoded(request)
        let consumer = try await KafkaConsumer.tailing(topic: topics.status, configuration: kafka, logger: logger)
        try await enqueue(request)
        return Self.statuses(of: request.id, from: consumer)
    }

    /// Follows the statuses of an enqueued transfer: first its latest status
    /// so far (so a transfer that already finished is found at once: the
    /// stream then holds its terminal status only), then the ones that follow.
    public func follow(id: String) async throws(KafkaError) -> AsyncStream<TransferStatus> {
        // Tail first, then read the past: nothing published in between is missed (a repeat is harmless).
        let consumer = try await KafkaConsumer.tailing(topic: topics.status, configuration: kafka, logger: logger)
        let latest = try await status(of: id)
        if let latest, latest.state.isTerminal {
            consumer.stopFetching()
            return AsyncStream { continuation in
                continuation.yield(latest)
                continuation.finish()
            }
        }
        return Self.statuses(of: id, from: consumer, first: latest)
    }

    /// Every transfer of the fleet with its latest status, read from
    /// `<prefix>.status` (a table keyed by transfer id), newest first;
    /// `states` keeps only those (e.g. `[.running, .paused]`).
    public func list(states: Set<TransferStatus.State>? = nil, timeout: Double = 30) async throws(KafkaError) -> [TransferStatus] {
        // Statuses are keyed by transfer id, and one key's statuses share a partition, in order: the
        // last message read of a key is its latest. The topic is folded by key as it is read (decoding
        // there would slow the read into pauses), so what is held is a message per transfer.
        var latestByKey: [[UInt8]: KafkaMessage] = [:]
        var unkeyed: [KafkaMessage] = []
        try await KafkaConsumer.scan(topic: topics.status, configuration: kafka, timeout: timeout, logger: logger) { message in
            if let key = message.key { latestByKey[key] = message } else { unkeyed.append(message) }
        }
        let decoder = JSONDecoder()
        var latest: [String: TransferStatus] = [:]
        var skipped = 0
        var firstSkipped: String?
        for message in (Array(latestByKey.values) + unkeyed).sorted(by: { ($0.partition, $0.offset) < ($1.partition, $1.offset) }) {
            do {
                let status = try decoder.decode(TransferStatus.self, from: Data(message.value))
                latest[status.id] = status
            } catch {
                skipped += 1
                if firstSkipped == nil {
                    firstSkipped = "\(message.topic)[\(message.partition)] at offset \(message.offset): \(DecodingProblem.describe(error))"
                }
            }
        }
        if let firstSkipped {
            logger.warning("skipped \(skipped) message(s) that are not statuses; the first: \(firstSkipped)")
        }
        return latest.values.filter { states?.contains($0.state) ?? true }.sorted { $0.time > $1.time }
    }

    /// Pauses a transfer, running or not yet started: no byte moves until `resume`.
    /// The decision is kept by every worker (docs/producers/requests.md).
    public func pause(id: String) async throws(KafkaError) { try await control(.pause, id: id) }

    /// Resumes a paused transfer without re-sending what it stored.
    public func resume(id: String) async throws(KafkaError) { try await control(.resume, id: id) }

    /// Cancels a transfer, running, queued or not yet consumed.
    public func cancel(id: String) async throws(KafkaError) { try await control(.cancel, id: id) }

    private func control(_ action: ControlMessage.Action, id: String) async throws(KafkaError) {
        let value = (try? FerryJSON.encode(ControlMessage(id: id, action: action))) ?? []
        try await producer.send(topic: topics.control, key: id, value: value)
    }

    /// The latest status of `id` on `<prefix>.status` (the topic is read to its end), or nil.
    public func status(of id: String, timeout: Double = 30) async throws(KafkaError) -> TransferStatus? {
        // One id's statuses share a partition (keyed by id), so the last one read is the latest;
        // only that one is kept while the topic is read.
        var last: KafkaMessage?
        let key = Array(id.utf8)
        try await KafkaConsumer.scan(topic: topics.status, configuration: kafka, timeout: timeout, logger: logger) { message in
            if message.key == key { last = message }
        }
        return last.flatMap { try? JSONDecoder().decode(TransferStatus.self, from: Data($0.value)) }
    }

    /// Every transfer's statuses as they arrive: from now on, or with
    /// `fromBeginning` first everything the topic still holds (read by the same
    /// consumer, so no status falls between the past and the present). The
    /// feed is read at the reader's pace: see `StatusFeed`.
    public func allStatuses(fromBeginning: Bool = false) async throws(KafkaError) -> StatusFeed {
        let consumer = fromBeginning
            ? try await KafkaConsumer.replaying(topic: topics.status, configuration: kafka, logger: logger).consumer
            : try await KafkaConsumer.tailing(topic: topics.status, configuration: kafka, logger: logger)
        return StatusFeed(consumer: consumer, logger: logger)
    }

    private static func statuses(of id: String, from consumer: KafkaConsumer, first: TransferStatus? = nil) -> AsyncStream<TransferStatus> {
        AsyncStream { continuation in
            let task = Task {
                if let first { continuation.yield(first) }
                let decoder = JSONDecoder()
                for await message in consumer where message.keyString == id {
                    guard let status = try? decoder.decode(TransferStatus.self, from: Data(message.value)) else { continue }
                    continuation.yield(status)
                    if status.state.isTerminal { break }
                }
                await consumer.close()
                continuation.finish()
            }
            continuation.onTermination = { _ in
                task.cancel()
                consumer.stopFetching()
            }
        }
    }
}

extension TransferClient {
    /// Enqueues `request` and waits for its terminal status (`completed`,
    /// `failed`, `cancelled` or `rejected`); `progress` sees each status before it.
    /// Throws `TransferClientError.timedOut` when none arrives within `timeout` seconds.
    public func run(_ request: TransferRequest, timeout: Double = 3600,
                    progress: @escaping @Sendable (TransferStatus) -> Void = { _ in }) async throws -> TransferStatus {
        let statuses = try await enqueueAndFollow(request)
        return try await Self.terminal(of: statuses, id: request.id, timeout: timeout, progress: progress)
    }

    /// Waits for the terminal status of an enqueued transfer; one that already
    /// finished is answered at once.
    public func result(of id: String, timeout: Double = 3600,
                       progress: @escaping @Sendable (TransferStatus) -> Void = { _ in }) async throws -> TransferStatus {
        try await Self.terminal(of: try await follow(id: id), id: id, timeout: timeout, progress: progress)
    }

    /// The progress of a transfer (`running` and `paused` statuses as bytes and
    /// total), ending when it reaches a terminal state.
    public func progress(of id: String) async throws(KafkaError) -> AsyncStream<TransferProgressUpdate> {
        let statuses = try await follow(id: id)
        return AsyncStream { continuation in
            let task = Task {
                for await status in statuses {
                    continuation.yield(TransferProgressUpdate(state: status.state, bytesTransferred: status.bytesTransferred ?? 0,
                                                              totalBytes: status.totalBytes))
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    private static func terminal(of statuses: AsyncStream<TransferStatus>, id: String, timeout: Double,
                                 progress: @escaping @Sendable (TransferStatus) -> Void) async throws -> TransferStatus {
        try await withThrowingTaskGroup(of: TransferStatus?.self) { group in
            group.addTask {
                for await status in statuses {
                    progress(status)
                    if status.state.isTerminal { return status }
                }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: .seconds(clamping: timeout))
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            guard let first else { throw TransferClientError.timedOut(id: id, seconds: timeout) }
            return first
        }
    }
}

/// How a transfer ended, typed: what a completion handler of TransferUtility gets.
public enum TransferResult: Sendable, Hashable {
    /// The object as stored (for downloads, the object read).
    case completed(TransferStatus.ObjectInfo?)
    case failed(FerryError)
    case cancelled(FerryError)
    /// Refused before any byte moved (validation, access rules, a poison message).
    case rejected(FerryError)
}

extension TransferStatus {
    /// The typed outcome of a terminal status; nil while the transfer is not over.
    public var result: TransferResult? {
        let error = self.error.map { FerryError(FerryError.Code(rawValue: $0.code), $0.message) }
            ?? FerryError(.internalError, "no error given")
        switch state {
        case .completed: return .completed(object)
        case .failed: return .failed(error)
        case .cancelled: return .cancelled(error)
        case .rejected: return .rejected(error)
        case .accepted, .running, .paused: return nil
        }
    }
}

/// One step of a transfer's progress, as `TransferClient.progress(of:)` reports it.
public struct TransferProgressUpdate: Sendable, Hashable {
    public var state: TransferStatus.State
    public var bytesTransferred: Int64
    public var totalBytes: Int64?
    /// 0…1 when the size is known.
    public var fraction: Double? {
        guard let totalBytes, totalBytes > 0 else { return nil }
        return Double(bytesTransferred) / Double(totalBytes)
    }
}

public enum TransferClientError: Error, CustomStringConvertible, Sendable {
    case timedOut(id: String, seconds: Double)
    /// The request breaks a rule workers apply (the error has the code a worker would give); it was not sent.
    case invalidRequest(FerryError)
    public var description: String {
        switch self {
        case .timedOut(let id, let seconds): return "no terminal status for \(id) within \(seconds.clampedInt()) s"
        case .invalidRequest(let error): return "request not sent: \(error)"
        }
    }
}

extension TransferRequest {
    /// An upload of a local file (`file://` under the worker's data root), a
    /// `data:` URI or an `https://` URL to `bucket`/`key`.
    public static func upload(id: String = UUID().uuidString, from source: String, to bucket: String, key: String,
                              accessLevel: AccessLevel = .guest, identityId: String? = nil,
                              contentType: String? = nil, metadata: [String: String]? = nil,
                              options: TransferOptions? = nil) -> TransferRequest {
        TransferRequest(id: id, op: .upload, bucket: bucket, key: key, accessLevel: accessLevel, identityId: identityId,
                        source: source, contentType: contentType, metadata: metadata, options: options)
    }

    /// A download of `bucket`/`key` to a `file://` destination under the worker's data root.
    public static func download(id: String = UUID().uuidString, from bucket: String, key: String, to destination: String,
                                accessLevel: AccessLevel = .guest, identityId: String? = nil,
                                targetIdentityId: String? = nil, options: TransferOptions? = nil) -> TransferRequest {
        TransferRequest(id: id, op: .download, bucket: bucket, key: key, accessLevel: accessLevel, identityId: identityId,
                        targetIdentityId: targetIdentityId, destination: destination, options: options)
    }

    /// A copy from `s3://bucket/key` to `bucket`/`key`, inside storage. With
    /// `sourceAccessLevel` the source's key is a user key of that level (owned
    /// by `sourceIdentityId`, default the caller), as Amplify's `Storage.copy`
    /// names it; without, it is the full S3 key.
    public static func copy(id: String = UUID().uuidString, from source: String, to bucket: String, key: String,
                            accessLevel: AccessLevel = .guest, identityId: String? = nil,
                            sourceAccessLevel: AccessLevel? = nil, sourceIdentityId: String? = nil) -> TransferRequest {
        TransferRequest(id: id, op: .copy, bucket: bucket, key: key, accessLevel: accessLevel, identityId: identityId, source: source,
                        sourceAccessLevel: sourceAccessLevel, sourceIdentityId: sourceIdentityId)
    }

    /// A delete of `bucket`/`key`.
    public static func delete(id: String = UUID().uuidString, bucket: String, key: String,
                              accessLevel: AccessLevel = .guest, identityId: String? = nil) -> TransferRequest {
        TransferRequest(id: id, op: .delete, bucket: bucket, key: key, accessLevel: accessLevel, identityId: identityId)
    }
}
