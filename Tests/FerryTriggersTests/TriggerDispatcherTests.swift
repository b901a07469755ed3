import FerryKafka
import FerryTestSupport
import FerryCore
import FerryTriggerKit
@testable import FerryTriggers
import Foundation
import Logging
import Synchronization
import Testing

/// Lambda's asynchronous-invocation semantics, over the mock cluster.
@Suite struct TriggerDispatcherTests {
    let logger = Logger(label: "test.dispatcher")

    /// Fails its first `failures` invocations, recording each attempt number.
    final class FlakyHandler: S3EventHandler {
        let failures: Int
        let attempts = Mutex<[Int]>([])
        init(failures: Int) { self.failures = failures }
        func handle(_ event: S3Event, context: TriggerContext) async throws {
            let n = attempts.withLock { $0.append(context.attempt); return $0.count }
            if n <= failures { throw FerryError(.internalError, "planned failure \(n)") }
        }
    }

    func event(key: String, eventTime: String = Timestamp.iso8601(Date())) -> S3Event {
        S3Event(records: [S3Event.Record(
            awsRegion: "us-east-1", eventTime: eventTime, eventName: "ObjectCreated:Put",
            userIdentity: .init(principalId: "p"), requestParameters: .init(sourceIPAddress: "127.0.0.1"),
            responseElements: .init(requestId: "r", id2: "i"),
            s3: .init(configurationId: "c", bucket: .init(name: "b", ownerIdentity: .init(principalId: "o")),
                      object: .init(rawKey: key, size: 1, eTag: "e", sequencer: "01")))])
    }

    /// Runs a dispatcher over `messages` until `done` holds for the DLQ's records so far; returns the DLQ.
    func run(_ triggers: [S3TriggerRegistration], messages: [String], keys: [String]? = nil, queuedAt: [Date?]? = nil,
             requests: RequestsSeen? = nil, until done: @escaping ([Kcat.Record]) -> Bool) async throws -> [Kcat.Record] {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
        let topics = Topics(prefix: "t\(UUID().uuidString.prefix(6))")
        for topic in topics.all { try cluster.createTopic(topic, partitions: 2) }
        let kafka = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
        let producer = try KafkaProducer(configuration: kafka, logger: logger)
        var registry = TriggerRegistry()
        for t in triggers { try registry.register(t) }
        let dispatcher = try TriggerDispatcher(registry: registry, environment: .init(dataRoot: URL(fileURLWithPath: "/tmp"), outputDirectory: URL(fileURLWithPath: "/tmp"), region: "us-east-1"),
                                               topics: topics, kafka: kafka, producer: producer, logger: logger)
        let running = Task { await dispatcher.run() }
        for (i, m) in messages.enumerated() {
            try await producer.send(topic: topics.events, key: Array((keys?[i] ?? "b/k").utf8), value: Array(m.utf8),
                                    timestampMs: queuedAt?[i].map { Int64($0.timeIntervalSince1970 * 1000) })
        }
        let kcat = Kcat(bootstrapServers: cluster.bootstrapServers)

        _ = try await eventually(timeout: 40, every: 0.3) { done(try await kcat.consumeAll(topic: topics.triggersDLQ)) }
        try await Task.sleep(for: .milliseconds(300))
        running.cancel()
        await running.value
        if let requests { requests.records = try await kcat.consumeAll(topic: topics.requests) }
        return try await kcat.consumeAll(topic: topics.triggersDLQ)
    }

    func json(_ event: S3Event) throws -> String { String(decoding: try JSONEncoder().encode(event), as: UTF8.self) }

    @Test func retriesThenSucceeds() async throws {
        let handler = FlakyHandler(failures: 2)
        let trigger = S3TriggerRegistration(name: "flaky", events: ["ObjectCreated:*"],
                                            delivery: AsyncDelivery(maximumRetryAttempts: 2, retryDelaySeconds: 0.05), handler: handler)
        let dlq = try await run([trigger], messages: [try json(event(key: "a"))]) { _ in handler.attempts.withLock { $0.count } >= 3 }
        #expect(handler.attempts.withLock { $0 } == [1, 2, 3])
        #expect(dlq.isEmpty)
    }

    @Test func exhaustedRetriesWriteAnInvocationRecord() async throws {
        let handler = FlakyHandler(failures: 100)
        let trigger = S3TriggerRegistration(name: "broken", events: ["ObjectCreated:*"],
                                            delivery: AsyncDelivery(maximumRetryAttempts: 1, retryDelaySeconds: 0.05), handler: handler)
        let dlq = try await run([trigger], messages: [try json(event(key: "a b"))]) { !$0.isEmpty }
        #expect(handler.attempts.withLock { $0 } == [1, 2])
        let record = try #require(dlq.first)
        let parsed = try JSONSerialization.jsonObject(with: Data(record.value.utf8)) as! [String: Any]
        let context = parsed["requestContext"] as! [String: Any]
        #expect(context["condition"] as? String == "RetriesExhausted")
        #expect(context["functionArn"] as? String == "ferry:trigger:broken")
        #expect(context["approximateInvokeCount"] as? Int == 2)
        #expect((parsed["responsePayload"] as? [String: Any])?["errorMessage"] as? String == "InternalError: planned failure 2")
        let payload = try JSONDecoder().decode(S3Event.self, from: JSONSerialization.data(withJSONObject: parsed["requestPayload"]!))
        #expect(payload.records.first?.s3.object.decodedKey == "a b")
    }

    @Test func undecodableEventsAreDeadLetteredAndDoNotBlock() async throws {
        let handler = FlakyHandler(failures: 0)
        let trigger = S3TriggerRegistration(name: "ok", events: ["*"], handler: handler)
        let testEvent = #"{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2026-01-01T00:00:00.000Z","Bucket":"b","RequestId":"r","HostId":"h"}"#
        // An event that names a member twice: readers differ on what it says.
        let twice = try json(event(key: "twice")).replacingOccurrences(of: #""eventName":"#, with: #""eventName":"ObjectRemoved:Delete","eventName":"#)
        let dlq = try await run([trigger], messages: ["{not json", testEvent, twice, try json(event(key: "after"))]) {
            handler.attempts.withLock { $0.count } >= 1 && $0.count >= 2
        }
        #expect(handler.attempts.withLock { $0.count } == 1)
        // The garbage and the repeat are dead-lettered; S3's test event is skipped, not dead-lettered.
        #expect(dlq.count == 2)
        #expect(dlq.allSatisfy { $0.value.contains("UndecodableEvent") })
        #expect(dlq.contains { $0.value.contains("member 'Records[0].eventName' appears more than once") }, "\(dlq.map(\.value))")
    }

    @Test func slowHandlersTimeOut() async throws {
        struct Sleeper: S3EventHandler {
            func handle(_ event: S3Event, context: TriggerContext) async throws { try await Task.sleep(for: .seconds(30)) }
        }
        let trigger = S3TriggerRegistration(name: "slow", events: ["*"],
                                            delivery: AsyncDelivery(maximumRetryAttempts: 0, timeoutSeconds: 0.2), handler: Sleeper())
        let dlq = try await run([trigger], messages: [try json(event(key: "x"))]) { !$0.isEmpty }
        #expect(dlq.first?.value.contains("timed out") == true)
    }

    /// Where a test reads `<prefix>.requests` after the run.
    final class RequestsSeen: @unchecked Sendable {
        var records: [Kcat.Record] = []
    }

    @Test func eventsOlderThanTheMaximumAgeAreDeadLetteredUninvoked() async throws {
        let handler = FlakyHandler(failures: 0)
        let trigger = S3TriggerRegistration(name: "young-only", events: ["*"],
                                            delivery: AsyncDelivery(maximumEventAgeSeconds: 60), handler: handler)
        // Age counts from the queue (the message's time), not from eventTime: an event
        // queued two minutes ago is old; one `ferry reconcile` queues now for a write
        // two days old is young.
        let twoMinutesAgo = Date().addingTimeInterval(-120), twoDaysAgo = Timestamp.iso8601(Date().addingTimeInterval(-2 * 86_400))
        let dlq = try await run([trigger], messages: [try json(event(key: "old", eventTime: Timestamp.iso8601(twoMinutesAgo))),
                                                     try json(event(key: "late", eventTime: twoDaysAgo)), try json(event(key: "new"))],
                                queuedAt: [twoMinutesAgo, nil, nil]) {
            !$0.isEmpty && handler.attempts.withLock { $0.count } >= 2
        }
        #expect(handler.attempts.withLock { $0.count } == 2)  // the late and the new event
        #expect(dlq.count == 1)
        let parsed = try JSONSerialization.jsonObject(with: Data(try #require(dlq.first).value.utf8)) as! [String: Any]
        let context = parsed["requestContext"] as! [String: Any]
        #expect(context["condition"] as? String == "EventAgeExceeded")
        #expect(context["approximateInvokeCount"] as? Int == 0)
    }

    /// A producer whose clock runs an hour ahead stamps its events an hour in the
    /// future. Their age counts from when they were read, so the age limit still
    /// holds: by the third attempt, 1.8 s after the first, the event is older than
    /// 1 s. (Counted from the stamp, the event stayed young and all three ran.)
    @Test func anEventStampedInTheFutureAgesFromWhenItWasRead() async throws {
        let handler = FlakyHandler(failures: 10)
        let trigger = S3TriggerRegistration(name: "skewed", events: ["*"],
                                            delivery: AsyncDelivery(maximumRetryAttempts: 2, retryDelaySeconds: 0.6, maximumEventAgeSeconds: 1),
                                            handler: handler)
        let anHourAhead = Date().addingTimeInterval(3_600)
        let dlq = try await run([trigger], messages: [try json(event(key: "ahead", eventTime: Timestamp.iso8601(anHourAhead)))],
                                queuedAt: [anHourAhead]) { !$0.isEmpty }
        let parsed = try JSONSerialization.jsonObject(with: Data(try #require(dlq.first).value.utf8)) as! [String: Any]
        let context = parsed["requestContext"] as! [String: Any]
        #expect(context["condition"] as? String == "EventAgeExceeded")
        // Two tries fit in the second (one, when a loaded machine is slow to make the first).
        #expect((1...2).contains(context["approximateInvokeCount"] as? Int ?? 0))
        #expect([[1], [1, 2]].contains(handler.attempts.withLock { $0 }))
    }

    /// Writes one object: where depends on the test.
    struct Writer: S3EventHandler {
        let key: String
        func handle(_ event: S3Event, context: TriggerContext) async throws {
            try await context.transfers.enqueue(TransferRequest(id: "w-\(key.count)-\(context.attempt)", op: .upload, bucket: "b", key: key,
                                                                source: "data:;base64,aGk="))
        }
    }

    @Test func aHandlerWritingIntoItsOwnPrefixIsStoppedWithoutRetries() async throws {
        // Guest keys live under public/: the handler watching public/in/ writes public/in/copy.txt.
        let looping = S3TriggerRegistration(name: "looping", events: ["ObjectCreated:*"], prefix: "public/in/",
                                            delivery: AsyncDelivery(maximumRetryAttempts: 2, retryDelaySeconds: 0.05),
                                            handler: Writer(key: "in/copy.txt"))
        let safe = S3TriggerRegistration(name: "safe", events: ["ObjectCreated:*"], prefix: "public/src/",
                                         delivery: AsyncDelivery(retryDelaySeconds: 0.05), handler: Writer(key: "out/copy.txt"))
        let seen = RequestsSeen()
        let dlq = try await run([looping, safe], messages: [try json(event(key: "public/in/a.txt")), try json(event(key: "public/src/a.txt"))],
                                requests: seen) { !$0.isEmpty }
        #expect(dlq.count == 1)
        let parsed = try JSONSerialization.jsonObject(with: Data(try #require(dlq.first).value.utf8)) as! [String: Any]
        let context = parsed["requestContext"] as! [String: Any]
        #expect(context["condition"] as? String == "RecursiveInvocationDetected")
        #expect(context["functionArn"] as? String == "ferry:trigger:looping")
        #expect(context["approximateInvokeCount"] as? Int == 1)
        let message = (parsed["responsePayload"] as? [String: Any])?["errorMessage"] as? String ?? ""
        #expect(message.contains("s3://b/public/in/copy.txt") && message.contains("would trigger 'looping' again"))
        // The safe handler's write went out; the looping one's did not.
        let requests = seen.records
        #expect(requests.count == 1)
        #expect(requests.first?.value.contains("out/copy.txt") == true)
    }

    @Test func concurrencyLimitHoldsAcrossPartitions() async throws {
        final class Overlap: S3EventHandler {
            let state = Mutex<(now: Int, peak: Int, total: Int)>((0, 0, 0))
            func handle(_ event: S3Event, context: TriggerContext) async throws {
                state.withLock { $0.now += 1; $0.peak = max($0.peak, $0.now) }
                try await Task.sleep(for: .milliseconds(150))
                state.withLock { $0.now -= 1; $0.total += 1 }
            }
        }
        let keys = (0..<8).map { "b/key-\($0)" }
        var peaks: [Int] = []
        for limit in [1, nil] as [Int?] {
            let handler = Overlap()
            let trigger = S3TriggerRegistration(name: "limited", events: ["*"], delivery: AsyncDelivery(maximumConcurrency: limit), handler: handler)
            _ = try await run([trigger], messages: try keys.map { try json(event(key: $0)) }, keys: keys) { _ in
                handler.state.withLock { $0.total } >= 8
            }
            peaks.append(handler.state.withLock { $0.peak })
        }
        #expect(peaks[0] == 1)  // reserved concurrency 1
        #expect(peaks[1] == 2)  // one lane per partition (2 partitions)
    }

    /// A trigger that falls behind leaves its backlog in Kafka: the
    /// dispatcher holds at most `defaultLaneDepth` events per partition, not
    /// everything the consumer could fetch.
    @Test func aLaggingTriggerHoldsAtMostItsLaneDepthPerPartition() async throws {
        struct Stuck: S3EventHandler {
            func handle(_ event: S3Event, context: TriggerContext) async throws { try await Task.sleep(for: .seconds(600)) }
        }
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
        let topics = Topics(prefix: "t\(UUID().uuidString.prefix(6))")
        for topic in topics.all { try cluster.createTopic(topic, partitions: 2) }
        let kafka = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
        let producer = try KafkaProducer(configuration: kafka, logger: logger)
        let backlog = 2_000
        let value = Array(try json(event(key: "k")).utf8)
        let sent = await producer.sendAll((0..<backlog).map { OutgoingMessage(topic: topics.events, key: Array("b/k\($0)".utf8), value: value) })
        #expect(sent.allSatisfy { (try? $0.get()) != nil })
        var registry = TriggerRegistry()
        try registry.register(S3TriggerRegistration(name: "stuck", events: ["*"], delivery: AsyncDelivery(timeoutSeconds: 900), handler: Stuck()))
        let dispatcher = try TriggerDispatcher(registry: registry, environment: .init(dataRoot: URL(fileURLWithPath: "/tmp"), outputDirectory: URL(fileURLWithPath: "/tmp"), region: "us-east-1"),
                                               topics: topics, kafka: kafka, producer: producer, logger: logger)
        let running = Task { await dispatcher.run() }
        let limit = 2 * PartitionLanes.defaultLaneDepth
        // Both lanes fill (each partition got far more than a lane's depth), then intake waits.
        let filled = await eventually(timeout: 60) { dispatcher.heldMessages == limit }
        try await Task.sleep(for: .seconds(1))
        let later = dispatcher.heldMessages
        running.cancel()
        await running.value
        #expect(filled, "held \(dispatcher.heldMessages) of \(backlog), expected both lanes full (\(limit))")
        #expect(later == limit, "held \(later) a second later")
    }

    /// The offset lag an operator reads (Lambda's `OffsetLag`): everything
    /// not yet handled counts, what waits in Kafka and what the lanes and a
    /// held partition have taken from it alike; it falls to 0 once handled.
    @Test func aTriggerReportsEveryEventNotYetHandledAsItsOffsetLag() async throws {
        final class Gated: S3EventHandler {
            let open = Atomic<Bool>(false)
            func handle(_ event: S3Event, context: TriggerContext) async throws {
                while !open.load(ordering: .relaxed) { try await Task.sleep(for: .milliseconds(20)) }
            }
        }
        let brokers = try TwoPartitions(logger: logger)
        // More than a lane's depth on each partition, so that both hold their partition.
        let backlog = 4 * PartitionLanes.defaultLaneDepth + 37
        let value = Array(try json(event(key: "k")).utf8)
        let sent = await brokers.producer.sendAll((0..<backlog).map {
            OutgoingMessage(topic: brokers.topics.events, key: Array("b/k\($0)".utf8), value: value)
        })
        #expect(sent.allSatisfy { (try? $0.get()) != nil })
        let handler = Gated()
        let dispatcher = try brokers.dispatcher(S3TriggerRegistration(name: "gated", events: ["*"], delivery: AsyncDelivery(timeoutSeconds: 900),
                                                                      handler: handler), logger: logger)
        let running = Task { await dispatcher.run() }
        func total() -> Int64 { dispatcher.eventOffsetLag.reduce(0) { $0 + $1.1 } }
        let full = await eventually(timeout: 60) { dispatcher.heldMessages == 2 * PartitionLanes.defaultLaneDepth && total() == Int64(backlog) }
        #expect(full, "lag \(dispatcher.eventOffsetLag), lanes \(dispatcher.heldMessages), \(backlog) sent and none handled")
        #expect(dispatcher.eventOffsetLag.count == 2, "\(dispatcher.eventOffsetLag)")
        handler.open.store(true, ordering: .relaxed)
        let drained = await eventually(timeout: 60) { total() == 0 }
        #expect(drained, "lag \(dispatcher.eventOffsetLag) after the gate opened")
        running.cancel()
        await running.value
    }

    /// A dispatcher over two partitions of `<prefix>.events`, for the lane-depth tests.
    struct TwoPartitions {
        let cluster: EmbeddedKafkaCluster
        let topics: Topics
        let kafka: KafkaConfiguration
        let producer: KafkaProducer

        init(logger: Logger) throws {
            cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
            topics = Topics(prefix: "t\(UUID().uuidString.prefix(6))")
            for topic in topics.all { try cluster.createTopic(topic, partitions: 2) }
            kafka = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
            producer = try KafkaProducer(configuration: kafka, logger: logger)
        }

        func dispatcher(_ trigger: S3TriggerRegistration, logger: Logger) throws -> TriggerDispatcher {
            var registry = TriggerRegistry()
            try registry.register(trigger)
            return try TriggerDispatcher(registry: registry, environment: .init(dataRoot: URL(fileURLWithPath: "/tmp"), outputDirectory: URL(fileURLWithPath: "/tmp"), region: "us-east-1"),
                                         topics: topics, kafka: kafka, producer: producer, logger: logger)
        }
    }

    /// Records the object keys it is invoked with; blocks on keys starting with "stuck".
    final class KeyLog: S3EventHandler {
        let seen = Mutex<[String]>([])
        let slowFirst: Int
        init(slowFirst: Int = 0) { self.slowFirst = slowFirst }
        func handle(_ event: S3Event, context: TriggerContext) async throws {
            let key = event.records[0].s3.object.key
            if key.hasPrefix("stuck") { try await Task.sleep(for: .seconds(600)) }
            let n = seen.withLock { $0.append(key); return $0.count }
            if n <= slowFirst { try await Task.sleep(for: .milliseconds(3)) }
        }
    }

    /// A partition whose trigger is stuck is held alone: the other partition's
    /// events are all handled meanwhile (before, a full lane stopped the
    /// intake, and with it every partition of the group).
    @Test func aStuckPartitionDoesNotStopTheOthers() async throws {
        let kafka = try TwoPartitions(logger: logger)
        var stuckPartition: Int32 = -1
        for i in 0..<(2 * PartitionLanes.defaultLaneDepth) {
            let sent = try await kafka.producer.sendReturningPosition(topic: kafka.topics.events, key: Array("b/stuck".utf8),
                                                                      value: Array(try json(event(key: "stuck.\(i)")).utf8))
            stuckPartition = sent.partition
        }
        var free: Set<String> = []
        for i in 0..<400 {
            let key = "free-\(i % 16).\(i)"
            let sent = try await kafka.producer.sendReturningPosition(topic: kafka.topics.events, key: Array("b/free-\(i % 16)".utf8),
                                                                      value: Array(try json(event(key: key)).utf8))
            if sent.partition != stuckPartition { free.insert(key) }
        }
        try #require(!free.isEmpty, "no free key hashed to the other partition")
        let handler = KeyLog()
        let dispatcher = try kafka.dispatcher(S3TriggerRegistration(name: "keys", events: ["*"], delivery: AsyncDelivery(timeoutSeconds: 900),
                                                                    handler: handler), logger: logger)
        let running = Task { await dispatcher.run() }
        let handled = await eventually(timeout: 60) { free.isSubset(of: Set(handler.seen.withLock { $0 })) }
        running.cancel()
        await running.value
        #expect(handled, "\(free.subtracting(handler.seen.withLock { $0 }).count) of \(free.count) events of the free partition not handled")
    }

    /// Lanes filling and being released again and again (a slow start) lose
    /// nothing, repeat nothing, and keep each key's order.
    @Test func heldAndReleasedPartitionsDeliverEveryEventOnceInOrder() async throws {
        let kafka = try TwoPartitions(logger: logger)
        let count = 3_000, keys = 8
        let sent = await kafka.producer.sendAll(try (0..<count).map { i in
            OutgoingMessage(topic: kafka.topics.events, key: Array("b/k\(i % keys)".utf8), value: Array(try json(event(key: "k\(i % keys).\(i)")).utf8))
        })
        #expect(sent.allSatisfy { (try? $0.get()) != nil })
        let handler = KeyLog(slowFirst: 1_500)
        let dispatcher = try kafka.dispatcher(S3TriggerRegistration(name: "keys", events: ["*"], handler: handler), logger: logger)
        let running = Task { await dispatcher.run() }
        let most = Mutex(0)
        let done = await eventually(timeout: 90, every: 0.02) {
            let held = dispatcher.heldMessages
            most.withLock { $0 = max($0, held) }
            return handler.seen.withLock { $0.count } >= count
        }
        try await Task.sleep(for: .milliseconds(500))
        running.cancel()
        await running.value
        #expect(done)
        let seen = handler.seen.withLock { $0 }
        #expect(seen.count == count, "handled \(seen.count) times for \(count) events")
        #expect(Set(seen).count == count)
        for k in 0..<keys {
            let order = seen.filter { $0.hasPrefix("k\(k).") }.map { Int($0.split(separator: ".")[1])! }
            #expect(order == order.sorted(), "key k\(k) out of order")
        }
        #expect(most.withLock { $0 } <= 2 * PartitionLanes.defaultLaneDepth)
    }

    /// A stopped dispatcher's consumer goes with it: a lane's state holds the
    /// consumer, whose rebalance handler holds the lanes, and that cycle is
    /// broken when the dispatcher stops (a kept handle goes on reconnecting).
    @Test func aStoppedDispatcherFreesItsConsumer() async throws {
        let kafka = try TwoPartitions(logger: logger)
        let sent = await kafka.producer.sendAll(try (0..<50).map { i in
            OutgoingMessage(topic: kafka.topics.events, key: Array("b/k\(i)".utf8), value: Array(try json(event(key: "k\(i)")).utf8))
        })
        #expect(sent.allSatisfy { (try? $0.get()) != nil })
        weak var consumer: KafkaConsumer?
        do {
            let handler = KeyLog()
            let dispatcher = try kafka.dispatcher(S3TriggerRegistration(name: "keys", events: ["*"], handler: handler), logger: logger)
            consumer = dispatcher.eventConsumer
            let running = Task { await dispatcher.run() }
            #expect(await eventually(timeout: 60) { handler.seen.withLock { $0.count } >= 50 })
            running.cancel()
            await running.value
        }
        #expect(await eventually(timeout: 10) { consumer == nil }, "the stopped dispatcher's consumer is still alive")
    }
}
