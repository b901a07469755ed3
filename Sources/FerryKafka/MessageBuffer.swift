import CRdKafka
import DequeModule
import FerryCore
import Foundation
import Logging
import Synchronization
import FerryConcurrency

/// The hand-over between the poll thread and one async reader.
public final class MessageBuffer: Sendable {
    private struct State {
        /// A taken message leaves at once: the reader owns it, and its bytes go
        /// when the reader is done (an array with a moving head kept up to 1,024
        /// taken ones: a claim check's whole upload, 512 KiB a chunk).
        var messages = Deque<KafkaMessage>()
        /// Key and value bytes of the messages held.
        var bytes = 0
        var waiter: CheckedContinuation<KafkaMessage?, Never>?
        var finished = false
        /// Partitions the reader holds (`KafkaConsumer.hold`): their messages
        /// are set aside on arrival until the poll thread releases them.
        var held: [TopicPartition: HeldPartition] = [:]
        /// Holds and releases for the poll thread to carry out, in order.
        var holdRequests: [HoldRequest] = []
    }
    private let state = Mutex(State())
    let capacity: Int
    /// Fetching pauses at `capacity` messages or at this many bytes, whichever comes first.
    static let byteCapacity = 32 << 20

    init(capacity: Int) { self.capacity = capacity }

    var count: Int { state.withLock { $0.messages.count } }
    /// Messages and their bytes held now.
    var load: (count: Int, bytes: Int) { state.withLock { ($0.messages.count, $0.bytes) } }

    private static func size(_ message: KafkaMessage) -> Int { message.value.count + (message.key?.count ?? 0) }

    func append(_ message: KafkaMessage) {
        let waiter: CheckedContinuation<KafkaMessage?, Never>? = state.withLock { s in
            if !s.held.isEmpty, s.held[TopicPartition(topic: message.topic, partition: message.partition)]?.setAside(message) != nil { return nil }
            if let w = s.waiter { s.waiter = nil; return w }
            s.messages.append(message)
            s.bytes += Self.size(message)
            return nil
        }
        waiter?.resume(returning: message)
    }

    /// Drops buffered messages of partitions this consumer no longer owns; their
    /// new owner reads them again from the committed offset.
    func discard(_ partitions: Set<TopicPartition>) -> Int {
        state.withLock { s in
            let before = s.messages.count
            s.messages.removeAll { partitions.contains(TopicPartition(topic: $0.topic, partition: $0.partition)) }
            s.bytes = s.messages.reduce(0) { $0 + Self.size($1) }
            for partition in partitions { s.held[partition] = nil }
            s.holdRequests.removeAll { partitions.contains($0.partition) }
            return before - s.messages.count
        }
    }

    /// Sets `message` aside with its partition's buffered messages, and any
    /// that arrive until the partition is released; asks the poll thread to
    /// pause it. False (and `message` set aside too) if it is held already.
    func hold(givingBack message: KafkaMessage) -> Bool {
        let partition = TopicPartition(topic: message.topic, partition: message.partition)
        return state.withLock { s in
            if s.held[partition] != nil {
                s.held[partition]!.setAside(message)
                return false
            }
            var held = HeldPartition(message)
            s.messages.removeAll { m in
                guard m.partition == partition.partition && m.topic == partition.topic else { return false }
                held.setAside(m)
                return true
            }
            s.bytes = s.messages.reduce(0) { $0 + Self.size($1) }
            s.held[partition] = held
            s.holdRequests.append(.hold(partition))
            return true
        }
    }

    /// Asks the poll thread to resume a held partition. False if it is not held.
    func requestRelease(_ partition: TopicPartition) -> Bool {
        state.withLock { s in
            guard s.held[partition] != nil else { return false }
            s.holdRequests.append(.release(partition))
            return true
        }
    }

    /// The requests to carry out now (poll thread).
    func takeHoldRequests() -> [HoldRequest] {
        state.withLock { s in
            guard !s.holdRequests.isEmpty else { return [] }
            defer { s.holdRequests = [] }
            return s.holdRequests
        }
    }

    /// Where a held partition must be fetched again from (the first message
    /// dropped), or nil when all it fetched is set aside; `.none` if not held.
    func refetchOffset(_ partition: TopicPartition) -> Int64?? { state.withLock { $0.held[partition].map(\.refetchFrom) } }

    /// Ends a hold: the messages set aside come next, in order, and the
    /// partition's messages are taken again. Called by the poll thread after
    /// any seek and before it resumes the partition, so nothing fetched before
    /// the hold can arrive after this. False if the partition left meanwhile.
    func endHold(_ partition: TopicPartition) -> Bool {
        let (ended, handOver): (Bool, (CheckedContinuation<KafkaMessage?, Never>, KafkaMessage)?) = state.withLock { s in
            guard let held = s.held.removeValue(forKey: partition) else { return (false, nil) }
            var aside = held.messages
            var handOver: (CheckedContinuation<KafkaMessage?, Never>, KafkaMessage)?
            if let waiter = s.waiter, let first = aside.popFirst() {
                s.waiter = nil
                handOver = (waiter, first)
            }
            for m in aside { s.bytes += Self.size(m) }
            s.messages.append(contentsOf: aside)
            return (true, handOver)
        }
        if let (waiter, first) = handOver { waiter.resume(returning: first) }
        return ended
    }

    var heldPartitions: Set<TopicPartition> { state.withLock { Set($0.held.keys) } }

    func finish() {
        let waiter = state.withLock { s in
            s.finished = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }

    func next() async -> KafkaMessage? {
        await withCheckedContinuation { continuation in
            let ready: KafkaMessage?? = state.withLock { s in
                if let m = s.messages.popFirst() {
                    s.bytes -= Self.size(m)
                    return .some(m)
                }
                if s.finished { return .some(nil) }
                s.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    public struct Iterator: AsyncIteratorProtocol {
        let buffer: MessageBuffer
        public mutating func next() async -> KafkaMessage? { await buffer.next() }
    }
}
