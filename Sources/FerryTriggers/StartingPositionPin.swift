import FerryCore
import FerryTriggerKit
import FerryKafka
import Logging
import FerryConcurrency

/// A `LATEST` mapping's first position, made durable. Kafka's own
/// `auto.offset.reset=latest` would start at the end again on every start
/// until something is committed, so records written while no worker runs the
/// mapping would be skipped: instead the ends are committed for the mapping's
/// group before it joins, once, and from then on it goes on from its position.
enum StartingPositionPin {
    /// Commits each partition's end of `topic` for `group` when the group has
    /// no committed position on any partition; returns the ends, or nil when it
    /// had one (this mapping started before, on this worker or another).
    static func pinLatest(kafka: KafkaConfiguration, group: String, topic: String, logger: Logger) async throws(KafkaError) -> [Int32: Int64]? {
        let observer = try KafkaConsumer.observer(configuration: kafka, group: group, logger: logger)
        do throws(KafkaError) {
            let pinned = try await pin(group: group, topic: topic, with: observer)
            await observer.close()
            return pinned
        } catch {
            await observer.close()
            throw error
        }
    }

    private static func pin(group: String, topic: String, with observer: KafkaConsumer) async throws(KafkaError) -> [Int32: Int64]? {
        let partitions = try await observer.partitions(of: topic).map { TopicPartition(topic: topic, partition: $0) }
        if try await observer.committed(partitions).contains(where: { $0.offset >= 0 }) { return nil }
        let ends = try await observer.endOffsets(of: topic)
        do {
            try await observer.commit(ends.sorted { $0.key < $1.key }.map { TopicPartitionOffset(topic: topic, partition: $0.key, offset: $0.value) })
        } catch {
            // Refused when another worker's consumer joined the group first: that one pinned it.
            guard try await observer.committed(partitions).contains(where: { $0.offset >= 0 }) else { throw error }
            return nil
        }
        return ends
    }

    /// `pinLatest` until it succeeds or the task is cancelled (false then):
    /// a mapping that cannot know where to start does not start.
    static func pinLatestRetrying(kafka: KafkaConfiguration, group: String, topic: String, logger: Logger) async -> Bool {
        let pinned = await Backoff.coordinator.untilSuccess(failed: { error, retry in
            logger.error("stream trigger cannot pin its LATEST starting position yet, retry \(retry): \(error)")
        }) {
            try await pinLatest(kafka: kafka, group: group, topic: topic, logger: logger)
        }
        guard let pinned else { return false }
        if let ends = pinned {
            let positions = ends.sorted { $0.key < $1.key }.map { "[\($0.key)] \($0.value)" }.joined(separator: ", ")
            logger.info("stream trigger starts at LATEST: position pinned at the end of \(topic) (\(positions))")
        }
        return true
    }
}
