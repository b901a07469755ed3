import FerryCore
import FerryKafka
import Foundation
import Logging
import Synchronization
import FerryConcurrency

/// Reads record tables' compacted topics (`<prefix>.tables.<name>`, every
/// partition, no consumer group) into a view, from where the view last
/// stopped, and keeps following them. `caughtUp(table:)` waits until the view
/// holds everything the topic held when it was called: a worker calls it
/// before an item write, so it reads what other workers wrote before.
public final class TableFollower: Sendable {
    private let tables: [String]
    private let topics: Topics
    private let kafka: KafkaConfiguration
    private let view: any ItemViewWriter
    private let logger: Logger
    /// topic → partition → the next offset the view has yet to apply.
    private let positions = Mutex<[String: [Int32: Int64]]>([:])
    private let observer: KafkaConsumer

    public init(tables: [String], topics: Topics, kafka: KafkaConfiguration, view: any ItemViewWriter, logger: Logger) throws(KafkaError) {
        self.tables = tables; self.topics = topics; self.kafka = kafka; self.view = view; self.logger = logger
        observer = try KafkaConsumer.observer(configuration: kafka, group: "\(topics.prefix)-tables-observer", logger: logger)
    }

    /// Follows every table until cancelled; a table whose topic cannot be read
    /// yet is tried again within 2 s (`Backoff.tableTopic`).
    public func run() async {
        await withDiscardingTaskGroup { group in
            for table in tables {
                group.addTask { [self] in
                    var retry = 0
                    while !Task.isCancelled {
                        do {
                            try await follow(table)
                            retry = 0
                        } catch {
                            logger.warning("cannot read table \(table) (\(topics.table(table))), trying again within 2 s: \(error)")
                        }
                        retry += 1
                        guard await Backoff.tableTopic.pause(beforeRetry: retry) else { break }
                    }
                }
            }
        }
        await observer.close()
    }

    private func follow(_ table: String) async throws {
        let topic = topics.table(table)
        var from: [Int32: Int64] = [:]
        for partition in try await observer.partitions(of: topic) {
            // -2 is librdkafka's OFFSET_BEGINNING: a view that never read the partition starts at its log start.
            from[partition] = try await view.position(topic: topic, partition: partition) ?? -2
        }
        positions.withLock { known in
            for (partition, next) in from where next >= 0 { known[topic, default: [:]][partition] = next }
        }
        let consumer = try await KafkaConsumer.reading(topic: topic, from: from, configuration: kafka, bufferCapacity: 1024,
                                                       offsetReset: "earliest", logger: logger)
        defer { consumer.close() }  // synchronous: a group-less consumer leaves no group
        await withTaskCancellationHandler {
            for await message in consumer {
                let change = Self.change(in: message, table: table)
                if change == nil, !message.value.isEmpty {
                    logger.error("table \(table): skipped a record that is not a Ferry table record", metadata: [
                        "partition": "\(message.partition)", "offset": "\(message.offset)"])
                }
                _ = await Backoff.localState.untilSuccess(failed: { error, retry in
                    logger.error("table \(table): cannot write the view, retry \(retry): \(error)")
                }) {
                    try await view.apply(change.map { [$0] } ?? [], topic: topic, partition: message.partition, next: message.offset + 1)
                }
                positions.withLock { $0[topic, default: [:]][message.partition] = message.offset + 1 }
            }
        } onCancel: {
            consumer.stopFetching()
        }
    }

    /// What a table topic message says; nil when it is not a Ferry table record.
    public static func change(in message: KafkaMessage, table: String) -> ItemVersion? {
        guard let key = message.key, let itemKey = String(validating: key, as: UTF8.self) else { return nil }
        if message.value.isEmpty {
            guard let version = message.header(ItemRecord.versionHeader).flatMap({ Int64($0) }),
                  ItemRecord.versions.contains(version) else { return nil }
            return ItemVersion(table: table, itemKey: itemKey, version: version, record: nil)
        }
        guard let record = try? JSONDecoder().decode(ItemRecord.self, from: Data(message.value)),
              record.table == table, record.itemKey == itemKey, ItemRecord.versions.contains(record.version) else { return nil }
        return ItemVersion(table: table, itemKey: itemKey, version: record.version, record: record)
    }

    /// Waits until the view holds what `table`'s topic holds now (at most
    /// `timeout` seconds). A table whose topic does not exist yet is empty.
    public func caughtUp(table: String, timeout: Double = 30) async throws(FerryError) {
        let topic = topics.table(table)
        let ends: [Int32: Int64]
        do {
            ends = try await observer.endOffsets(of: topic)
        } catch {
            if error.name.hasSuffix("UNKNOWN_TOPIC_OR_PART") || error.name.hasSuffix("UNKNOWN_TOPIC") { return }
            throw FerryError(.kafkaError, "cannot read the end of \(topic): \(error)")
        }
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let behind = positions.withLock { known in
                ends.filter { partition, end in end > 0 && (known[topic]?[partition] ?? 0) < end }
            }
            if behind.isEmpty { return }
            guard Date() < deadline, !Task.isCancelled else {
                throw FerryError(.kafkaError, "the view of table \(table) is behind \(topic) on partitions \(behind.keys.sorted()) after \(timeout.clampedInt()) s")
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}
