import FerryCore
import FerryEngine
import FerryKafka
import FerryS3
import FerryStorage
import Foundation
import Logging
import FerryConcurrency

/// Reads a claim-checked upload's chunks from Kafka by position (no group):
/// each chunk must carry its transfer's key and its planned length, the whole
/// its size and SHA-256. A chunk that left the topic (retention) is a clear
/// error, never a wait.
struct KafkaChunkFetcher: ChunkFetcher {
    let kafka: KafkaConfiguration
    /// The one topic claim checks are read from (`<prefix>.uploads`): a request
    /// must not have the worker read its chunks from any other topic it can
    /// read (statuses, item tables, another prefix's uploads).
    let topic: String
    let logger: Logger
    /// The longest a fetch waits for its chunks.
    static let timeoutSeconds: Double = 120

    func fetch(_ source: ChunkedSource, transferId: String, into descriptor: Int32,
               progress: TransferMeter) async throws(FerryError) -> Int64 {
        guard source.topic == topic else {
            throw FerryError(.forbiddenSource, "claim checks are read from \(topic) only; this one names \(source.topic)")
        }
        var wanted: [Int32: [Int64: Int]] = [:]
        for (index, position) in source.positions.enumerated() { wanted[position.partition, default: [:]][position.offset] = index }
        if !wanted.isEmpty {
            let consumer: KafkaConsumer
            do {
                // 512 KiB chunks: 16 held at most (8 MiB).
                consumer = try await KafkaConsumer.reading(topic: source.topic, from: wanted.mapValues { $0.keys.min()! },
                                                           configuration: kafka, bufferCapacity: 16, logger: logger)
            } catch {
                throw FerryError(.kafkaError, "cannot read \(source.topic): \(error)")
            }
            defer { consumer.close() }
            for partition in wanted.keys {
                try await checkPositions(wanted[partition]!.keys, of: TopicPartition(topic: source.topic, partition: partition),
                                         on: consumer, transferId: transferId)
            }
            try await read(consumer, wanted: wanted, source: source, transferId: transferId, into: descriptor, progress: progress)
        }
        // The whole, as the producer hashed it.
        let size = source.size
        let digest = try await BlockingPool.shared.run { () throws(FerryError) -> String in
            let hasher = Digest.Hasher.sha256()
            try ObjectBody.file(descriptor: descriptor, offset: 0, length: size).readAll { hasher.update($0) }
            return hasher.finish().hexString
        }
        guard digest == source.sha256 else {
            throw FerryError(.badDigest, "the chunks of \(transferId) do not hash to the SHA-256 the request gives")
        }
        return size
    }

    /// Fails at once, instead of after the fetch's timeout, when a chunk's
    /// position cannot hold it: the partition does not exist, retention has
    /// removed it, or it is past the partition's end. A producer sends the
    /// chunks and has them acknowledged before the request, so a chunk past
    /// the end does not exist; the end is asked again for a few seconds, for a
    /// producer whose acknowledgements come before replication (`acks=1`).
    /// When the broker cannot be asked, the fetch's own timeout decides.
    private func checkPositions(_ offsets: Dictionary<Int64, Int>.Keys, of partition: TopicPartition, on consumer: KafkaConsumer,
                                transferId: String) async throws(FerryError) {
        let first = offsets.min()!, last = offsets.max()!
        let place = "\(partition.topic)/\(partition.partition)"
        let deadline = ContinuousClock.now + .seconds(Self.endGraceSeconds)
        while true {
            let marks: (start: Int64, end: Int64)
            do {
                marks = try await consumer.watermarks(of: partition)
            } catch {
                guard ["UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC"].contains(error.name) else { return }
                throw FerryError(.noSuchKey, "chunks of \(transferId) are said to be on \(place), which does not exist")
            }
            if marks.start > first {
                throw FerryError(.noSuchKey, "chunks of \(transferId) are gone from \(place) (its log starts at \(marks.start), a chunk was at \(first)): the topic's retention ended the claim check")
            }
            if last < marks.end { return }
            guard !Task.isCancelled else { throw FerryError(.cancelled, "reading the chunks was interrupted") }
            guard ContinuousClock.now < deadline else {
                throw FerryError(.noSuchKey, "a chunk of \(transferId) is said to be at \(place) offset \(last), past the partition's end (\(marks.end)): no such chunk")
            }
            try? await Task.sleep(for: .milliseconds(250))
        }
    }

    /// How long a chunk past a partition's end is waited for (see `checkPositions`).
    static let endGraceSeconds: Double = 5

    private func read(_ consumer: KafkaConsumer, wanted: [Int32: [Int64: Int]], source: ChunkedSource, transferId: String,
                      into descriptor: Int32, progress: TransferMeter) async throws(FerryError) {
        var missing = wanted
        let timer = DeadlineTimer.start(after: Self.timeoutSeconds) { consumer.stopFetching() }
        defer { timer.cancel() }
        let outcome: FerryError? = await withTaskCancellationHandler {
            for await message in consumer {
                guard let index = missing[message.partition]?.removeValue(forKey: message.offset) else { continue }
                let range = source.range(of: index)
                guard message.keyString == ChunkedSource.key(transferId: transferId, index: index), Int64(message.value.count) == Int64(range.count) else {
                    return FerryError(.invalidRequest, "the message at \(source.topic)/\(message.partition)/\(message.offset) is not chunk \(index) of \(transferId)")
                }
                let value = message.value
                let written = await BlockingPool.shared.run { () -> Bool in
                    value.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t(range.lowerBound)) == $0.count }
                }
                guard written else { return FerryError(.localIOError, "cannot write chunk \(index) of \(transferId)") }
                progress.add(Int64(value.count))
                if missing[message.partition]?.isEmpty == true { missing[message.partition] = nil }
                if missing.isEmpty { return nil }
            }
            return Task.isCancelled ? FerryError(.cancelled, "reading the chunks was interrupted")
                : FerryError(.noSuchKey, "\(missing.values.map(\.count).reduce(0, +)) chunk(s) of \(transferId) were not found on \(source.topic) within \(Int(Self.timeoutSeconds)) s")
        } onCancel: {
            consumer.stopFetching()
        }
        if let outcome { throw outcome }
    }
}
