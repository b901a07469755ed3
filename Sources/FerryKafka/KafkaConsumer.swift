import CRdKafka
import DequeModule
import FerryCore
import Foundation
import Logging
import Synchronization
import FerryConcurrency

/// A librdkafka consumer whose messages arrive as an `AsyncSequence`.
///
/// A dedicated thread polls librdkafka and appends to a bounded buffer. When the
/// buffer is full the consumer pauses its partitions (rd_kafka_pause_partitions)
/// and keeps polling, so it stays in the group without fetching more; it resumes
/// them when the buffer drains to a quarter. Offsets are never committed
/// automatically: call `commit` with the offsets whose work is done.
public final class KafkaConsumer: Sendable, AsyncSequence {
    public typealias Element = KafkaMessage

    private let handle: KafkaHandle
    private let buffer: MessageBuffer
    private let poller: PollThread
    private let logger: Logger
    private let closed = Atomic<Bool>(false)
    /// Kept alive as long as the handle whose callbacks use it.
    private let rebalanceBox: RebalanceBox?
    private let cooperativeStrategy: Bool

    /// Joins `configuration["group.id"]` and subscribes to `topics`. With a
    /// `rebalance` handler, assignments and revocations are reported to it
    /// (eager or cooperative-sticky, whichever `partition.assignment.strategy`
    /// names; cooperative-sticky by default, so a rebalance only moves the
    /// partitions that change owner).
    public convenience init(configuration: KafkaConfiguration, subscribing topics: [String],
                            bufferCapacity: Int = 64, rebalance: RebalanceHandler? = nil, logger: Logger) throws(KafkaError) {
        var configuration = configuration
        if rebalance != nil && configuration["partition.assignment.strategy"] == nil {
            configuration["partition.assignment.strategy"] = "cooperative-sticky"
        }
        try self.init(configuration: configuration, bufferCapacity: bufferCapacity, rebalance: rebalance, logger: logger)
        let list = rd_kafka_topic_partition_list_new(Int32(topics.count))
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for topic in topics { rd_kafka_topic_partition_list_add(list, topic, RD_KAFKA_PARTITION_UA) }
        let err = rd_kafka_subscribe(handle.rk, list)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err, context: "subscribe to \(topics)") }
    }

    /// Reads every partition of `topic` from its current end, without a group
    /// subscription: only messages produced after this returns are seen.
    public static func tailing(topic: String, configuration: KafkaConfiguration, logger: Logger) async throws(KafkaError) -> KafkaConsumer {
        let consumer = try KafkaConsumer(configuration: configuration, bufferCapacity: 1024, rebalance: nil, logger: logger)
        _ = try await consumer.assignAll(topic, from: nil)
        return consumer
    }

    /// Reads every partition of `topic` from its beginning, without a group,
    /// then keeps following it. Returns each partition's end offset at the
    /// start, so the caller can tell when it has caught up with the past.
    public static func replaying(topic: String, configuration: KafkaConfiguration,
                                 logger: Logger) async throws(KafkaError) -> (consumer: KafkaConsumer, ends: [Int32: Int64]) {
        let consumer = try KafkaConsumer(configuration: configuration, bufferCapacity: 4096, rebalance: nil, logger: logger)
        let ends = try await consumer.assignAll(topic, from: Int64(RD_KAFKA_OFFSET_BEGINNING))
        return (consumer, ends)
    }

    /// Reads the given partitions of `topic` from the given offsets, without a
    /// group (claim-checked uploads are read by position). An offset below a
    /// partition's log start is an error librdkafka reports as out of range:
    /// `auto.offset.reset` is `error`, so nothing else is read in its place.
    /// `bufferCapacity` messages are held before fetching pauses: small for
    /// large messages (upload chunks), large for small ones (a full buffer
    /// pauses and refetches, which costs the mock cluster a fetch wait each time).
    /// (`offsetReset: "earliest"` instead starts such a partition at its log
    /// start: for compacted tables, whose old offsets compaction removes.)
    public static func reading(topic: String, from offsets: [Int32: Int64], configuration: KafkaConfiguration,
                               bufferCapacity: Int = 64, offsetReset: String = "error", logger: Logger) async throws(KafkaError) -> KafkaConsumer {
        var configuration = configuration
        configuration["auto.offset.reset"] = offsetReset
        let consumer = try KafkaConsumer(configuration: configuration, bufferCapacity: bufferCapacity, rebalance: nil, logger: logger)
        let handle = consumer.handle
        let result = await BlockingPool.shared.run {
            Result { () throws(KafkaError) in
                let list = rd_kafka_topic_partition_list_new(Int32(offsets.count))
                defer { rd_kafka_topic_partition_list_destroy(list) }
                for (partition, offset) in offsets { rd_kafka_topic_partition_list_add(list, topic, partition).pointee.offset = offset }
                let err = rd_kafka_assign(handle.rk, list)
                guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err, context: "assign \(topic)") }
            }
        }
        try result.get()
        return consumer
    }

    /// Each partition's end offset (high watermark) of `topic`, now.
    public func endOffsets(of topic: String) async throws(KafkaError) -> [Int32: Int64] {
        let handle = self.handle
        let result = await BlockingPool.shared.run {
            Result { () throws(KafkaError) -> [Int32: Int64] in Dictionary(uniqueKeysWithValues: try KafkaConsumer.endOffsets(rk: handle.rk, topic: topic)) }
        }
        return try result.get()
    }

    /// A consumer of `group` that joins nothing and reads nothing: for asking
    /// the group's committed offsets and the topics' watermarks.
    public static func observer(bootstrapServers: String, group: String, logger: Logger) throws(KafkaError) -> KafkaConsumer {
        try KafkaConsumer(configuration: KafkaConfiguration(bootstrapServers: bootstrapServers, ["group.id": group]),
                          bufferCapacity: 1, rebalance: nil, logger: logger)
    }

    /// The same, with the rest of `configuration` (security settings) kept.
    public static func observer(configuration: KafkaConfiguration, group: String, logger: Logger) throws(KafkaError) -> KafkaConsumer {
        var configuration = configuration
        configuration["group.id"] = group
        return try KafkaConsumer(configuration: configuration, bufferCapacity: 1, rebalance: nil, logger: logger)
    }

    /// The partition numbers of `topic`, from the broker's metadata.
    public func partitions(of topic: String) async throws(KafkaError) -> [Int32] {
        let handle = self.handle
        let result = await BlockingPool.shared.run {
            Result { () throws(KafkaError) -> [Int32] in try KafkaConsumer.partitionIds(rk: handle.rk, topic: topic) }
        }
        return try result.get()
    }

    /// Every message of `topic` up to its current end (read without a group),
    /// or as many as arrive within `timeout` seconds.
    public static func snapshot(topic: String, configuration: KafkaConfiguration, timeout: Double = 30,
                                logger: Logger) async throws(KafkaError) -> [KafkaMessage] {
        var messages: [KafkaMessage] = []
        try await scan(topic: topic, configuration: configuration, timeout: timeout, logger: logger) { messages.append($0) }
        return messages
    }

    /// Hands each message of `topic` up to its current end (read without a
    /// group) to `body`, in each partition's order, holding none of them: a
    /// reader that folds (the latest status of an id) needs memory for what it
    /// keeps, not for the topic. Ends early after `timeout` seconds.
    public static func scan(topic: String, configuration: KafkaConfiguration, timeout: Double = 30, logger: Logger,
                            _ body: (KafkaMessage) -> Void) async throws(KafkaError) {
        let consumer = try KafkaConsumer(configuration: configuration, bufferCapacity: 4096, rebalance: nil, logger: logger)
        defer { consumer.close() }
        var remaining = try await consumer.assignAll(topic, from: Int64(RD_KAFKA_OFFSET_BEGINNING)).filter { $0.value > 0 }
        guard !remaining.isEmpty else { return }
        let timer = Task {
            try? await Task.sleep(for: .seconds(timeout))
            consumer.stopFetching()
        }
        defer { timer.cancel() }
        for await message in consumer {
            body(message)
            if let end = remaining[message.partition], message.offset >= end - 1 { remaining[message.partition] = nil }
            if remaining.isEmpty { break }
        }
    }

    /// Assigns every partition of `topic` (no group) from `offset`, a librdkafka
    /// logical offset such as RD_KAFKA_OFFSET_BEGINNING, or from each partition's
    /// current end when nil. Blocking metadata calls run off the cooperative pool.
    /// Returns each partition's end offset as it was.
    private func assignAll(_ topic: String, from offset: Int64?) async throws(KafkaError) -> [Int32: Int64] {
        let handle = self.handle
        let result = await BlockingPool.shared.run {
                let rk = handle.rk
                return Result { () throws(KafkaError) -> [Int32: Int64] in
                    let ends = try KafkaConsumer.endOffsets(rk: rk, topic: topic)
                    let list = rd_kafka_topic_partition_list_new(Int32(ends.count))
                    defer { rd_kafka_topic_partition_list_destroy(list) }
                    for (partition, end) in ends {
                        rd_kafka_topic_partition_list_add(list, topic, partition).pointee.offset = offset ?? end
                    }
                    let err = rd_kafka_assign(rk, list)
                    guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err, context: "assign \(topic)") }
                    return Dictionary(uniqueKeysWithValues: ends)
                }
        }
        return try result.get()
    }

    /// The most one fetch answer may carry (`fetch.max.bytes`), unless the
    /// operator sets it or a `message.max.bytes` above it: librdkafka's 50 MiB
    /// answer stays allocated while any message in it is queued, and a worker
    /// has a consumer per role and trigger group. At the heap's peak of an S6
    /// run on Tansu, 26 of 57 MiB were such answers (heaptrack; NOTES.md,
    /// 2026-12-02, later). A message larger than this still comes, alone.
    public static let fetchAnswerBytes = 4 << 20
    /// librdkafka's own prefetch (`queued.max.messages.kbytes`; 64 MiB by
    /// default), unless the operator sets it: four answers. This consumer's
    /// `MessageBuffer` is what feeds the reader; librdkafka's queue only refills
    /// it. Not one answer: a partition whose queue is over this after an answer
    /// waits out a fetch backoff (a 2 MiB prefetch with 2 MiB answers took
    /// 450 KB messages in at 6 MB/s in the full test suite).
    public static let prefetchKiB = 4 * fetchAnswerBytes >> 10

    private init(configuration: KafkaConfiguration, bufferCapacity: Int, rebalance: RebalanceHandler?, logger: Logger) throws(KafkaError) {
        var configuration = configuration
        configuration["enable.auto.commit"] = "false"
        configuration["enable.auto.offset.store"] = "false"
        if configuration["auto.offset.reset"] == nil { configuration["auto.offset.reset"] = "earliest" }
        // A fetch waits at most this long for data (librdkafka's default is 500 ms). Brokers
        // answer as soon as data arrives, but the mock cluster waits the whole time, which
        // capped the pipeline at one buffer refill per half second (77 requests/s measured).
        if configuration["fetch.wait.max.ms"] == nil { configuration["fetch.wait.max.ms"] = "25" }
        if configuration["queued.max.messages.kbytes"] == nil { configuration["queued.max.messages.kbytes"] = "\(Self.prefetchKiB)" }
        if configuration["fetch.max.bytes"] == nil, (configuration["message.max.bytes"].flatMap(Int.init) ?? 0) <= Self.fetchAnswerBytes {
            configuration["fetch.max.bytes"] = "\(Self.fetchAnswerBytes)"
        }
        if configuration["group.id"] == nil { configuration["group.id"] = "ferry-\(UUID().uuidString)" }
        cooperativeStrategy = configuration["partition.assignment.strategy"]?.contains("cooperative") ?? false
        let conf = try configuration.makeNative(for: .consumer)
        let buffer = MessageBuffer(capacity: bufferCapacity)
        let flow = FlowControl(logger: logger)
        let gaps = GapDetector(group: configuration["group.id"] ?? "", unreadStartsAtZero: configuration.unreadStartsAtZero, logger: logger)
        if let rebalance {
            let box = RebalanceBox(handler: rebalance, buffer: buffer, flow: flow, gaps: gaps, logger: logger)
            rd_kafka_conf_set_opaque(conf, Unmanaged.passUnretained(box).toOpaque())
            rd_kafka_conf_set_rebalance_cb(conf, rebalanceCallback)
            rebalanceBox = box
        } else {
            rebalanceBox = nil
        }
        handle = try KafkaHandle(type: RD_KAFKA_CONSUMER, conf: conf, logger: logger)
        rd_kafka_poll_set_consumer(handle.rk)
        self.logger = logger
        self.buffer = buffer
        let handle = self.handle
        flow.attach(handle.rk)
        self.gaps = gaps
        let seekFailures = WarningThrottle()
        poller = PollThread(name: "ferry-kafka-consumer") {
            let rk = handle.rk
            for request in buffer.takeHoldRequests() {
                request.carryOut(rk: rk, buffer: buffer, flow: flow, gaps: gaps, seekFailures: seekFailures, logger: logger)
            }
            let load = buffer.load
            flow.adjust(count: load.count, bytes: load.bytes, capacity: bufferCapacity, byteCapacity: MessageBuffer.byteCapacity,
                        held: buffer.heldPartitions)
            guard let message = rd_kafka_consumer_poll(rk, 100) else { return }
            defer { rd_kafka_message_destroy(message) }
            let err = message.pointee.err
            if err == RD_KAFKA_RESP_ERR_NO_ERROR {
                let copy = KafkaMessage(copying: message)
                gaps.check(copy, rk: rk)
                buffer.append(copy)
            } else if err != RD_KAFKA_RESP_ERR__PARTITION_EOF {
                logger.warning("kafka consumer: \(KafkaError(err, context: "poll"))")
            }
        }
    }

    private let gaps: GapDetector

    /// Messages the broker deleted (retention, or the mock cluster's 5 MiB per
    /// partition) before this consumer's group read them, since it started.
    public var messagesLost: Int64 { gaps.lostTotal.load(ordering: .relaxed) }

    /// The same, by partition.
    public var messagesLostByPartition: [TopicPartition: Int64] { gaps.lostByPartition }

    /// The partitions assigned to this consumer now, and the assignments it
    /// has received since it started (one per rebalance it took part in, an
    /// empty one included); both 0 without a rebalance handler.
    public var assignment: (partitions: Int, rebalances: Int) {
        guard let rebalanceBox else { return (0, 0) }
        return (rebalanceBox.assignedCount.load(ordering: .relaxed), rebalanceBox.assignments.load(ordering: .relaxed))
    }

    /// A property as the live handle holds it, after librdkafka's own
    /// adjustments (`fetch.max.bytes` is held below the prefetch); nil if unknown.
    func effectiveProperty(_ name: String) -> String? {
        guard let conf = rd_kafka_conf(handle.rk) else { return nil }
        var size = 0
        guard rd_kafka_conf_get(conf, name, nil, &size) == RD_KAFKA_CONF_OK, size > 0 else { return nil }
        var text = [CChar](repeating: 0, count: size)
        guard rd_kafka_conf_get(conf, name, &text, &size) == RD_KAFKA_CONF_OK else { return nil }
        return String(cBuffer: text)
    }

    /// Messages fetched but not yet read.
    public var bufferedCount: Int { buffer.count }
    /// Key and value bytes of the messages buffered now.
    public var bufferedBytes: Int { buffer.load.bytes }

    public func makeAsyncIterator() -> MessageBuffer.Iterator { MessageBuffer.Iterator(buffer: buffer) }

    /// How long a commit or a committed-offsets query may take: librdkafka's
    /// synchronous calls can wait without end while the group coordinator
    /// moves (the mock cluster, a broker restart), and nothing may wait for ever.
    public static let coordinatorTimeoutMs: Int32 = 10_000

    /// Commits `offsets` (each the offset of the next message to read, with its
    /// metadata) and waits for the broker's answer, at most `timeoutMs`.
    public func commit(_ offsets: [TopicPartitionOffset], timeoutMs: Int32 = KafkaConsumer.coordinatorTimeoutMs) async throws(KafkaError) {
        guard !offsets.isEmpty else { return }
        let handle = self.handle
        let err = await BlockingPool.shared.run { Self.commitBounded(rk: handle.rk, offsets, timeoutMs: timeoutMs).rawValue }
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR.rawValue else { throw KafkaError(rd_kafka_resp_err_t(rawValue: err), context: "commit") }
    }

    /// A commit through a private queue, so the wait for its result has a bound
    /// (`rd_kafka_commit` in synchronous mode has none). Blocks the calling thread.
    static func commitBounded(rk: OpaquePointer, _ offsets: [TopicPartitionOffset], timeoutMs: Int32) -> rd_kafka_resp_err_t {
        let list = rd_kafka_topic_partition_list_new(Int32(offsets.count))
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for o in offsets {
            let element = rd_kafka_topic_partition_list_add(list, o.topic, o.partition)!
            element.pointee.offset = o.offset
            element.setMetadata(o.metadata)
        }
        let queue = rd_kafka_queue_new(rk)
        defer { rd_kafka_queue_destroy(queue) }
        let err = rd_kafka_commit_queue(rk, list, queue, nil, nil)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { return err }
        guard let event = rd_kafka_queue_poll(queue, Int32(timeoutMs)) else { return RD_KAFKA_RESP_ERR__TIMED_OUT }
        defer { rd_kafka_event_destroy(event) }
        return rd_kafka_event_error(event)
    }

    /// The group's committed offset and metadata of each of `partitions`
    /// (offset -1001, RD_KAFKA_OFFSET_INVALID, when none). Asks the group
    /// coordinator, off the cooperative pool, for at most `timeoutMs`.
    public func committed(_ partitions: [TopicPartition], timeoutMs: Int32 = KafkaConsumer.coordinatorTimeoutMs) async throws(KafkaError) -> [TopicPartitionOffset] {
        guard !partitions.isEmpty else { return [] }
        let handle = self.handle
        // rd_kafka_committed can outlive its own timeout while the coordinator is
        // unknown: the answer is whichever comes first, it or the timer. The call
        // gets a thread of its own, not one of the blocking pool's: a wait with no
        // bound must not take a fixed pool's thread (it ends when librdkafka
        // answers or the handle goes).
        let answer = OneAnswer<Result<[TopicPartitionOffset], KafkaError>>()
        let timer = DeadlineTimer.start(after: Double(timeoutMs) / 1000 + 1) {
            answer.give(.failure(KafkaError(RD_KAFKA_RESP_ERR__TIMED_OUT, context: "committed offsets")))
        }
        defer { timer.cancel() }
        let result: Result<[TopicPartitionOffset], KafkaError> = await withCheckedContinuation { continuation in
            answer.onAnswer { continuation.resume(returning: $0) }
            ProcessThreads.start("ferry-kafka-ask") {
                let continuation = answer
                let list = rd_kafka_topic_partition_list_new(Int32(partitions.count))
                defer { rd_kafka_topic_partition_list_destroy(list) }
                for p in partitions { rd_kafka_topic_partition_list_add(list, p.topic, p.partition) }
                let err = rd_kafka_committed(handle.rk, list, Int32(timeoutMs))
                guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let list else {
                    continuation.give(.failure(KafkaError(err, context: "committed offsets")))
                    return
                }
                var found: [TopicPartitionOffset] = []
                for i in 0..<Int(list.pointee.cnt) {
                    let e = list.pointee.elems[i]
                    var metadata: String?
                    if let bytes = e.metadata, e.metadata_size > 0 {
                        metadata = String(decoding: UnsafeRawBufferPointer(start: bytes, count: e.metadata_size), as: UTF8.self)
                    }
                    found.append(TopicPartitionOffset(topic: String(cString: e.topic), partition: e.partition,
                                                      offset: e.offset, metadata: metadata))
                }
                continuation.give(.success(found))
            }
        }
        return try result.get()
    }

    /// Where the partition's log starts now (its low watermark), asked of the
    /// broker off the cooperative pool; nil when the broker does not answer.
    public func logStart(of partition: TopicPartition, timeoutMs: Int32 = 5_000) async -> Int64? {
        try? await watermarks(of: partition, timeoutMs: timeoutMs).start
    }

    /// A partition's log start and end (the offset the next message gets),
    /// asked of its leader. A partition the topic does not have is an error
    /// named `UNKNOWN_TOPIC_OR_PART` (or librdkafka's `_UNKNOWN_PARTITION`).
    public func watermarks(of partition: TopicPartition, timeoutMs: Int32 = 5_000) async throws(KafkaError) -> (start: Int64, end: Int64) {
        let handle = self.handle
        let result = await BlockingPool.shared.run {
            Result { () throws(KafkaError) -> (start: Int64, end: Int64) in
                var low: Int64 = -1, high: Int64 = -1
                let err = rd_kafka_query_watermark_offsets(handle.rk, partition.topic, partition.partition, &low, &high, timeoutMs)
                guard err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(err, context: "watermarks of \(partition.topic)/\(partition.partition)") }
                return (low, high)
            }
        }
        return try result.get()
    }

    /// Messages behind the end of each assigned partition: the high watermark
    /// (as last seen by librdkafka, no broker round trip) minus this consumer's
    /// fetch position, or minus `positions[partition]` where the reader knows
    /// better (the first offset it has not handled: what it fetched and holds
    /// counts as behind). Partitions without a position yet are left out.
    public func lag(from positions: [TopicPartition: Int64] = [:]) -> [(TopicPartition, Int64)] {
        var list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
        guard rd_kafka_assignment(handle.rk, &list) == RD_KAFKA_RESP_ERR_NO_ERROR, let list else { return [] }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        guard rd_kafka_position(handle.rk, list) == RD_KAFKA_RESP_ERR_NO_ERROR else { return [] }
        var result: [(TopicPartition, Int64)] = []
        for i in 0..<Int(list.pointee.cnt) {
            let element = list.pointee.elems[i]
            let partition = TopicPartition(topic: String(cString: element.topic), partition: element.partition)
            let position = positions[partition] ?? element.offset
            var low: Int64 = 0, high: Int64 = 0
            guard position >= 0,
                  rd_kafka_get_watermark_offsets(handle.rk, element.topic, element.partition, &low, &high) == RD_KAFKA_RESP_ERR_NO_ERROR,
                  high >= 0 else { continue }
            result.append((partition, Swift.max(0, high - position)))
        }
        return result
    }

    /// Stops fetching `message`'s partition, for a reader that cannot take
    /// its messages now without holding up the other partitions. `message`
    /// (given back) and what was buffered or still arrives of the partition
    /// are set aside, up to `HeldPartition.limit`; past that they are dropped
    /// and fetched again. After `release` they come first, in order. The
    /// backlog waits in Kafka, not in memory. A revocation ends the hold.
    public func hold(givingBack message: KafkaMessage) {
        guard buffer.hold(givingBack: message) else { return }
        wakePoller()
    }

    /// Lets a held partition's messages come again.
    public func release(_ partition: TopicPartition) {
        guard buffer.requestRelease(partition) else { return }
        wakePoller()
    }

    /// Ends the poll thread's wait, so that it carries out hold requests now.
    private func wakePoller() {
        guard !closed.load(ordering: .acquiring), let queue = rd_kafka_queue_get_consumer(handle.rk) else { return }
        rd_kafka_queue_yield(queue)
        rd_kafka_queue_destroy(queue)
    }

    /// Ends the message sequence; the consumer stays in its group so that
    /// finished work can still be committed before `close`.
    public func stopFetching() {
        buffer.finish()
    }

    /// Stops polling, leaves the group and ends the message sequence.
    /// `close` from async code: leaving the group (revocation handlers, their
    /// commits) waits on the blocking pool, not on the cooperative pool.
    public func close() async {
        await BlockingPool.shared.run { self.closeNow() }
    }

    public func close() { closeNow() }

    private func closeNow() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        poller.stop()
        rd_kafka_consumer_close(handle.rk)
        buffer.finish()
        // librdkafka before 2.3.0 aborts when a cooperative-sticky member that never
        // got an assignment is destroyed (confluentinc/librdkafka#4312, fixed by #4381;
        // Debian 12 ships 2.0.2). Such a handle holds nothing: it is left to the exit.
        if let box = rebalanceBox, cooperativeStrategy, !box.everAssigned.load(ordering: .acquiring) {
            handle.leakOnDeinit.store(true, ordering: .releasing)
            logger.debug("kafka consumer: closed before its first assignment; handle left to process exit (librdkafka#4312)")
        }
    }

    deinit { close() }

    /// The partition numbers of `topic` (a metadata request; blocks).
    static func partitionIds(rk: OpaquePointer, topic: String) throws(KafkaError) -> [Int32] {
        let rkt = rd_kafka_topic_new(rk, topic, nil)
        defer { rd_kafka_topic_destroy(rkt) }
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let err = rd_kafka_metadata(rk, 0, rkt, &metadata, 10_000)
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
            throw KafkaLogSink.sink(for: rk).explain(KafkaError(err, context: "metadata of \(topic)"), brokers: nil)
        }
        defer { rd_kafka_metadata_destroy(metadata) }
        guard metadata.pointee.topic_cnt == 1, metadata.pointee.topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(name: "UnknownTopic", message: "topic \(topic) does not exist")
        }
        let t = metadata.pointee.topics[0]
        return (0..<Int(t.partition_cnt)).map { t.partitions[$0].id }
    }

    /// The high watermark of each partition of `topic`.
    static func endOffsets(rk: OpaquePointer, topic: String) throws(KafkaError) -> [(Int32, Int64)] {
        let partitions = try partitionIds(rk: rk, topic: topic)
        guard !partitions.isEmpty else { throw KafkaError(name: "UnknownTopic", message: "topic \(topic) does not exist") }
        var ends: [(Int32, Int64)] = []
        for partition in partitions {
            var low: Int64 = 0, high: Int64 = 0
            let e = rd_kafka_query_watermark_offsets(rk, topic, partition, &low, &high, 10_000)
            guard e == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(e, context: "watermarks of \(topic)/\(partition)") }
            ends.append((partition, high))
        }
        return ends
    }
}
