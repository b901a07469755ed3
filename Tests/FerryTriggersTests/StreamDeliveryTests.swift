import FerryKafka
import FerryTestSupport
import FerryCore
import FerryTriggerKit
@testable import FerryTriggers
import Foundation
import Logging
import Synchronization
import Testing

/// Event source mapping semantics for stream triggers, over the mock cluster:
/// each behaviour of Lambda's DynamoDB-stream mapping has its own test.
@Suite struct StreamDeliveryTests {
    let logger = Logger(label: "test.streams")

    /// Answers each invocation with `behaviour(records, invocation number)`; keeps the eventIDs of each batch.
    final class Scripted: StreamRecordHandler {
        let behaviour: @Sendable ([DynamoDBEvent.Record], Int) throws -> StreamBatchResponse
        let batches = Mutex<[[String]]>([])
        init(_ behaviour: @escaping @Sendable ([DynamoDBEvent.Record], Int) throws -> StreamBatchResponse = { _, _ in .success }) {
            self.behaviour = behaviour
        }
        func handle(_ event: DynamoDBEvent, context: TriggerContext) async throws -> StreamBatchResponse {
            let n = batches.withLock { $0.append(event.records.map(\.eventID)); return $0.count }
            return try behaviour(event.records, n)
        }
        var seen: [[String]] { batches.withLock { $0 } }
    }

    struct Planned: Error, CustomStringConvertible { var description: String { "planned failure" } }

    static func record(_ key: String, _ seq: Int, name: DynamoDBEvent.EventName = .insert, size: Int = 1,
                       table: String = "objects", created: Date = Date()) -> DynamoDBEvent.Record {
        let keys: AttributeMap = ["bucket": .string("b"), "key": .string(key)]
        var image = keys
        image["size"] = .number(size)
        return DynamoDBEvent.Record(
            eventID: "\(key)#\(seq)", eventName: name, awsRegion: "us-east-1",
            eventSourceARN: "arn:aws:dynamodb:us-east-1:000000000000:table/\(table)/stream/ferry",
            dynamodb: StreamRecord(approximateCreationDateTime: created.timeIntervalSince1970, keys: keys,
                                   newImage: name == .remove ? nil : image, oldImage: name == .insert ? nil : image,
                                   sequenceNumber: String(format: "1%020d%04d", seq, 0), streamViewType: .newAndOldImages))
    }

    /// A mock cluster with Ferry's topics (and `extra` ones), a producer and kcat.
    struct Cluster {
        let cluster: EmbeddedKafkaCluster
        let topics: Topics
        let kafka: KafkaConfiguration
        let producer: KafkaProducer
        let kcat: Kcat

        init(partitions: Int = 2, extra: [String] = [], logger: Logger) throws {
            cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
            topics = Topics(prefix: "s\(UUID().uuidString.prefix(6))")
            for topic in topics.all + extra { try cluster.createTopic(topic, partitions: partitions) }
            var kafka = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
            // The mock cluster waits out a silent member's whole session before a
            // rebalance completes (45 s by default): keep sessions short, as `ferry dev` does.
            kafka["session.timeout.ms"] = "6000"
            kafka["heartbeat.interval.ms"] = "1000"
            self.kafka = kafka
            producer = try KafkaProducer(configuration: kafka, logger: logger)
            kcat = Kcat(bootstrapServers: cluster.bootstrapServers)
        }

        /// Each record enters the topic at its creation time, as a worker's own
        /// records do, or at `queuedAt` (a record written late, as by `ferry reconcile`).
        func send(_ records: [DynamoDBEvent.Record], queuedAt: Date? = nil) async throws {
            for record in records {
                let queued = queuedAt?.timeIntervalSince1970 ?? record.dynamodb.approximateCreationDateTime
                try await producer.send(topic: topics.streams, key: Array(record.kafkaKey.utf8), value: Array(try JSONEncoder().encode(record)),
                                        timestampMs: queued.map { Int64($0 * 1000) })
            }
        }

        func dispatcher(_ triggers: [StreamTriggerRegistration], logger: Logger) throws -> TriggerDispatcher {
            var registry = TriggerRegistry()
            for t in triggers { try registry.register(t) }
            return try TriggerDispatcher(registry: registry, environment: .init(dataRoot: URL(fileURLWithPath: "/tmp"), outputDirectory: URL(fileURLWithPath: "/tmp"), region: "us-east-1"),
                                         topics: topics, kafka: kafka, producer: producer, logger: logger)
        }
    }

    /// Runs one dispatcher over `records` until `done` holds; returns the records of `destination` (default the DLQ).
    func run(_ trigger: StreamTriggerRegistration, _ records: [DynamoDBEvent.Record], destination: String? = nil,
             until done: @escaping ([Kcat.Record]) -> Bool) async throws -> [Kcat.Record] {
        let kafka = try Cluster(extra: destination.map { [$0] } ?? [], logger: logger)
        // Sent first, so a batch holds every record of a partition (the group starts from the earliest offset).
        try await kafka.send(records)
        let dispatcher = try kafka.dispatcher([trigger], logger: logger)
        let running = Task { await dispatcher.run() }
        let topic = destination ?? kafka.topics.triggersDLQ
        _ = try await eventually(timeout: 40, every: 0.3) { done(try await kafka.kcat.consumeAll(topic: topic)) }
        try await Task.sleep(for: .milliseconds(300))
        running.cancel()
        await running.value
        return try await kafka.kcat.consumeAll(topic: topic)
    }

    func parse(_ record: Kcat.Record) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(record.value.utf8)) as! [String: Any]
    }

    @Test func exhaustedRetriesGoToTheOnFailureDestinationWithTheBatch() async throws {
        let handler = Scripted { _, _ in throw Planned() }
        let trigger = StreamTriggerRegistration(
            name: "always-fails", table: "objects",
            mapping: EventSourceMapping(batchSize: 10, maximumBatchingWindowSeconds: 1, maximumRetryAttempts: 2,
                                        onFailureDestination: "custom.failures", retryDelaySeconds: 0.05),
            handler: handler)
        let records = (0..<3).map { Self.record("k", $0) }
        let out = try await run(trigger, records, destination: "custom.failures") { !$0.isEmpty }
        #expect(handler.seen.count == 3)  // first try + 2 retries
        #expect(Set(handler.seen.map { $0.count }) == [3])
        let failure = try parse(try #require(out.first))
        let context = failure["requestContext"] as! [String: Any]
        #expect(context["condition"] as? String == "RetryAttemptsExhausted")
        #expect(context["approximateInvokeCount"] as? Int == 3)
        let info = failure["DDBStreamBatchInfo"] as! [String: Any]
        #expect(info["batchSize"] as? Int == 3)
        #expect(info["startSequenceNumber"] as? String == records[0].dynamodb.sequenceNumber)
        #expect(info["endSequenceNumber"] as? String == records[2].dynamodb.sequenceNumber)
        #expect((failure["records"] as? [[String: Any]])?.map { $0["eventID"] as? String } == records.map(\.eventID))
        #expect(failure["errorMessage"] as? String == "planned failure")
    }

    /// A failed record is named by its SequenceNumber (Lambda's itemIdentifier for
    /// streams) or by its eventID.
    @Test(arguments: [false, true])
    func partialBatchFailureRetriesFromTheFirstFailedItem(bySequenceNumber: Bool) async throws {
        let handler = Scripted { records, n in
            let name = { (record: DynamoDBEvent.Record) in bySequenceNumber ? record.dynamodb.sequenceNumber : record.eventID }
            return n == 1 && records.count == 5 ? StreamBatchResponse(failedEventIDs: [name(records[3]), name(records[2])]) : .success
        }
        let trigger = StreamTriggerRegistration(name: "partial", table: "objects",
                                                mapping: EventSourceMapping(maximumBatchingWindowSeconds: 1, reportBatchItemFailures: true, retryDelaySeconds: 0.05),
                                                handler: handler)
        let records = (0..<5).map { Self.record("k", $0) }
        let dlq = try await run(trigger, records) { _ in handler.seen.count >= 2 }
        #expect(handler.seen == [records.map(\.eventID), records[2...].map(\.eventID)])
        #expect(dlq.isEmpty)
    }

    @Test func withoutReportBatchItemFailuresTheResponseIsIgnored() async throws {
        let handler = Scripted { records, _ in StreamBatchResponse(failedEventIDs: [records[0].eventID]) }
        let trigger = StreamTriggerRegistration(name: "ignored", table: "objects",
                                                mapping: EventSourceMapping(maximumBatchingWindowSeconds: 1), handler: handler)
        let records = (0..<3).map { Self.record("k", $0) } + [Self.record("k", 3)]
        _ = try await run(trigger, Array(records.prefix(3))) { _ in handler.seen.count >= 1 }
        try await Task.sleep(for: .milliseconds(500))
        #expect(handler.seen.count == 1)
    }

    @Test func bisectIsolatesThePoisonRecord() async throws {
        let handler = Scripted { records, _ in
            if records.contains(where: { $0.eventID == "k#2" }) { throw Planned() }
            return .success
        }
        let trigger = StreamTriggerRegistration(
            name: "bisect", table: "objects",
            mapping: EventSourceMapping(maximumBatchingWindowSeconds: 1, maximumRetryAttempts: 0, bisectBatchOnFunctionError: true,
                                        retryDelaySeconds: 0.05),
            handler: handler)
        let records = (0..<4).map { Self.record("k", $0) }
        let dlq = try await run(trigger, records) { !$0.isEmpty && handler.seen.last == ["k#3"] }
        #expect(handler.seen == [["k#0", "k#1", "k#2", "k#3"], ["k#0", "k#1"], ["k#2", "k#3"], ["k#2"], ["k#3"]])
        #expect(dlq.count == 1)
        let failed = try parse(try #require(dlq.first))
        #expect((failed["records"] as? [[String: Any]])?.map { $0["eventID"] as? String } == ["k#2"])
    }

    @Test func recordsOlderThanTheMaximumAgeAreNotInvoked() async throws {
        let handler = Scripted()
        let trigger = StreamTriggerRegistration(name: "aged", table: "objects",
                                                mapping: EventSourceMapping(maximumRecordAgeSeconds: 60), handler: handler)
        let old = Self.record("old", 1, created: Date().addingTimeInterval(-600))
        let young = Self.record("young", 2)
        let dlq = try await run(trigger, [old, young]) { !$0.isEmpty && !handler.seen.isEmpty }
        #expect(handler.seen.flatMap { $0 } == ["young#2"])
        let failed = try parse(try #require(dlq.first))
        #expect((failed["requestContext"] as? [String: Any])?["condition"] as? String == "RecordAgeExceeded")
        #expect((failed["records"] as? [[String: Any]])?.map { $0["eventID"] as? String } == ["old#1"])
    }

    /// A record's age counts from when it entered the stream topic: one that
    /// `ferry reconcile` writes today for a change made two days ago (its
    /// creation time) is young, and delivered.
    @Test func aRecordWrittenLateIsAgedFromItsArrival() async throws {
        let handler = Scripted()
        let trigger = StreamTriggerRegistration(name: "aged", table: "objects",
                                                mapping: EventSourceMapping(maximumRecordAgeSeconds: 60), handler: handler)
        let kafka = try Cluster(partitions: 1, logger: logger)
        let dispatcher = try kafka.dispatcher([trigger], logger: logger)
        let running = Task { await dispatcher.run() }
        try await kafka.send([Self.record("late", 1, created: Date().addingTimeInterval(-2 * 86_400))], queuedAt: Date())
        _ = await eventually(timeout: 90) { !handler.seen.isEmpty }
        running.cancel()
        await running.value
        #expect(handler.seen.flatMap { $0 } == ["late#1"])
        #expect(try await kafka.kcat.consumeAll(topic: kafka.topics.triggersDLQ).isEmpty)
    }

    /// A record stamped an hour ahead (a producer's clock ahead, or a change time
    /// from such a clock) ages from when it was read: with retries without end and
    /// a 1 s age limit, it leaves for the DLQ as too old instead of being retried
    /// for an hour.
    @Test func aRecordStampedInTheFutureAgesFromWhenItWasRead() async throws {
        let handler = Scripted { _, _ in throw Planned() }
        let trigger = StreamTriggerRegistration(name: "skewed", table: "objects",
                                                mapping: EventSourceMapping(maximumRecordAgeSeconds: 1, retryDelaySeconds: 0.3),
                                                handler: handler)
        let anHourAhead = Date().addingTimeInterval(3_600)
        let dlq = try await run(trigger, [Self.record("ahead", 1, created: anHourAhead)]) { !$0.isEmpty }
        let failed = try parse(try #require(dlq.first))
        #expect((failed["requestContext"] as? [String: Any])?["condition"] as? String == "RecordAgeExceeded")
        #expect((1...6).contains(handler.seen.count))
        // Without a message time, the change's time stands in, held to the time of reading too.
        let readAt = Date()
        let item = StreamMapping.Item(message: KafkaMessage(topic: "s", partition: 0, offset: 0, key: nil, value: []),
                                      record: Self.record("ahead", 2, created: anHourAhead), readAt: readAt)
        #expect(item.queuedAt == readAt.timeIntervalSince1970)
        let old = Date().addingTimeInterval(-600)
        let stamped = StreamMapping.Item(message: KafkaMessage(topic: "s", partition: 0, offset: 0, key: nil, value: [],
                                                               timestampMs: Int64(old.timeIntervalSince1970 * 1000)),
                                         record: Self.record("ahead", 3, created: anHourAhead), readAt: readAt)
        #expect(abs(stamped.queuedAt - old.timeIntervalSince1970) < 0.002)
    }

    /// LATEST, as Lambda's StartingPosition: a new mapping skips what the stream
    /// topic held when it first started, and from then on goes on from its
    /// position: records written while no worker ran it are delivered after a
    /// restart (Kafka's own `latest` would skip those too). TRIM_HORIZON, the
    /// default, is every other test here: they send first, then start.
    @Test func latestStartsAtTheEndOnceAndThenGoesOnFromItsPosition() async throws {
        let kafka = try Cluster(partitions: 2, logger: logger)
        try await kafka.send((0..<4).map { Self.record("old", $0) })
        let handler = Scripted()
        let trigger = StreamTriggerRegistration(name: "latest", table: "objects", mapping: EventSourceMapping(startingPosition: .latest),
                                                handler: handler)
        var dispatcher = try kafka.dispatcher([trigger], logger: logger)
        var running = Task { [dispatcher] in await dispatcher.run() }
        // Assigned means pinned: the mapping joins its group only after that.
        let first = dispatcher
        let joined = await eventually(timeout: 60) { first.streamAssignments["latest"]?.count == 2 }
        #expect(joined)
        try await kafka.send((0..<3).map { Self.record("new", $0) })
        let delivered = await eventually(timeout: 60) { handler.seen.flatMap { $0 }.count >= 3 }
        #expect(delivered)
        running.cancel()
        await running.value
        try await kafka.send((0..<2).map { Self.record("gap", $0) })
        dispatcher = try kafka.dispatcher([trigger], logger: logger)
        running = Task { [dispatcher] in await dispatcher.run() }
        let caughtUp = await eventually(timeout: 60) { handler.seen.flatMap { $0 }.count >= 5 }
        #expect(caughtUp)
        try await Task.sleep(for: .milliseconds(500))
        running.cancel()
        await running.value
        #expect(handler.seen.flatMap { $0 }.sorted() == ["gap#0", "gap#1", "new#0", "new#1", "new#2"])
    }

    @Test func filterCriteriaSelectRecordsAndViewTypeShapesThem() async throws {
        let handler = Scripted()
        let images = Mutex<[Bool]>([])
        final class Viewer: StreamRecordHandler {
            let inner: Scripted
            let images: @Sendable (Bool) -> Void
            init(_ inner: Scripted, images: @escaping @Sendable (Bool) -> Void) { self.inner = inner; self.images = images }
            func handle(_ event: DynamoDBEvent, context: TriggerContext) async throws -> StreamBatchResponse {
                for record in event.records { images(record.dynamodb.newImage == nil && record.dynamodb.oldImage == nil) }
                return try await inner.handle(event, context: context)
            }
        }
        let filters = try FilterCriteria(patterns: [
            #"{"eventName":["INSERT"],"dynamodb":{"Keys":{"key":{"S":[{"prefix":"public/"}]}},"NewImage":{"size":{"N":[{"numeric":[">",10]}]}}}}"#,
            #"{"eventName":["REMOVE"],"dynamodb":{"Keys":{"key":{"S":[{"suffix":".log"}]}}}}"#,
        ])
        let trigger = StreamTriggerRegistration(name: "filtered", table: "objects", viewType: .keysOnly,
                                                mapping: EventSourceMapping(maximumBatchingWindowSeconds: 0.5, filterCriteria: filters),
                                                handler: Viewer(handler, images: { v in images.withLock { $0.append(v) } }))
        let records = [
            Self.record("public/big", 1, size: 50),          // passes the first pattern
            Self.record("public/small", 2, size: 5),         // too small
            Self.record("private/big", 3, size: 50),         // wrong prefix
            Self.record("public/big", 4, name: .modify, size: 50),  // MODIFY: neither pattern
            Self.record("x.log", 5, name: .remove),          // passes the second pattern
            Self.record("public/big", 6, size: 50, table: "transfers"),  // another table
        ]
        _ = try await run(trigger, records) { _ in handler.seen.flatMap { $0 }.count >= 2 }
        try await Task.sleep(for: .milliseconds(500))
        #expect(Set(handler.seen.flatMap { $0 }) == ["public/big#1", "x.log#5"])
        #expect(images.withLock { $0 }.allSatisfy { $0 })  // KEYS_ONLY: no images reach the handler
    }

    @Test func batchSizeAndBatchingWindowShapeInvocations() async throws {
        // The window is wide (15 s) because the test sends one record at a
        // time: on a loaded 2-core CI machine three sends once took over 5 s,
        // and the window (rightly) closed on a batch of 3.
        let window = 15.0
        let arrivals = Mutex<[Date]>([])
        let handler = Scripted { _, _ in arrivals.withLock { $0.append(Date()) }; return .success }
        let trigger = StreamTriggerRegistration(name: "batched", table: "objects",
                                                mapping: EventSourceMapping(batchSize: 4, maximumBatchingWindowSeconds: window), handler: handler)
        let kafka = try Cluster(partitions: 1, logger: logger)
        let dispatcher = try kafka.dispatcher([trigger], logger: logger)
        let running = Task { await dispatcher.run() }
        #expect(await eventually(timeout: 90) { dispatcher.streamAssignments["batched"]?.isEmpty == false })
        // Arrivals spread out, well inside one window: the first batch fills to 4 and
        // goes at once; the last 2 wait for the window to close.
        let started = Date()
        for i in 0..<6 {
            try await kafka.send([Self.record("k", i)])
            try await Task.sleep(for: .milliseconds(100))
        }
        _ = await eventually(timeout: 90) { handler.seen.flatMap { $0 }.count >= 6 }
        running.cancel()
        await running.value
        #expect(handler.seen.map(\.count) == [4, 2])
        let times = arrivals.withLock { $0 }.map { $0.timeIntervalSince(started) }
        try #require(times.count == 2)
        #expect(times[0] < window - 1, "the full batch went without waiting for the window (\(times[0]) s)")
        #expect(times[1] >= window - 0.5, "the partial batch waited for the window (\(times[1]) s)")
    }

    /// A batch larger than a lane's default depth fills to its batch size
    /// (Lambda allows 10,000): the lane is as deep as its mapping's batch.
    @Test func aBatchLargerThanTheDefaultLaneDepthFills() async throws {
        let batchSize = 5 * PartitionLanes.defaultLaneDepth
        let handler = Scripted()
        let trigger = StreamTriggerRegistration(name: "large", table: "objects",
                                                mapping: EventSourceMapping(batchSize: batchSize, maximumBatchingWindowSeconds: 20), handler: handler)
        let kafka = try Cluster(partitions: 1, logger: logger)
        let sent = await kafka.producer.sendAll(try (0..<batchSize).map { i in
            let record = Self.record("k\(i)", i)
            return OutgoingMessage(topic: kafka.topics.streams, key: Array(record.kafkaKey.utf8), value: Array(try JSONEncoder().encode(record)))
        })
        #expect(sent.allSatisfy { (try? $0.get()) != nil })
        let dispatcher = try kafka.dispatcher([trigger], logger: logger)
        let running = Task { await dispatcher.run() }
        // Well before the window closes, one full batch: it did not wait on the lane.
        let started = Date()
        let invoked = await eventually(timeout: 60) { !handler.seen.isEmpty }
        let waited = Date().timeIntervalSince(started)
        running.cancel()
        await running.value
        #expect(invoked)
        #expect(handler.seen.first?.count == batchSize)
        #expect(waited < 15, "the full batch went before its window closed (\(waited) s)")
    }

    @Test func loopGuardStopsAStreamHandlerWritingWhatItsFilterSelects() async throws {
        struct Writer: StreamRecordHandler {
            func handle(_ event: DynamoDBEvent, context: TriggerContext) async throws -> StreamBatchResponse {
                try await context.transfers.enqueue(TransferRequest(id: "loop-1", op: .upload, bucket: "b", key: "incoming/again.txt",
                                                                    source: "data:;base64,aGk="))
                return .success
            }
        }
        let trigger = StreamTriggerRegistration(
            name: "writer", table: "objects",
            mapping: EventSourceMapping(maximumRetryAttempts: 5,
                                        filterCriteria: try FilterCriteria(patterns: [#"{"dynamodb":{"Keys":{"key":{"S":[{"prefix":"public/incoming/"}]}}}}"#]),
                                        retryDelaySeconds: 0.05),
            handler: Writer())
        let dlq = try await run(trigger, [Self.record("public/incoming/a.txt", 1)]) { !$0.isEmpty }
        let failed = try parse(try #require(dlq.first))
        let context = failed["requestContext"] as! [String: Any]
        #expect(context["condition"] as? String == "RecursiveInvocationDetected")
        #expect(context["approximateInvokeCount"] as? Int == 1)
        #expect((failed["errorMessage"] as? String)?.contains("s3://b/public/incoming/again.txt") == true)
    }

    /// Two dispatchers in one group split the partitions; each key's records
    /// still reach a handler in SequenceNumber order, and every record arrives.
    @Test func perKeyOrderHoldsWithTwoDispatchers() async throws {
        let kafka = try Cluster(partitions: 4, logger: logger)
        let log = Mutex<[(dispatcher: Int, key: String, seq: Int)]>([])
        final class Recorder: StreamRecordHandler {
            let id: Int
            let log: @Sendable (Int, [DynamoDBEvent.Record]) -> Void
            init(id: Int, log: @escaping @Sendable (Int, [DynamoDBEvent.Record]) -> Void) { self.id = id; self.log = log }
            func handle(_ event: DynamoDBEvent, context: TriggerContext) async throws -> StreamBatchResponse {
                log(id, event.records)
                try await Task.sleep(for: .milliseconds(Int.random(in: 1...20)))
                return .success
            }
        }
        let append: @Sendable (Int, [DynamoDBEvent.Record]) -> Void = { id, records in
            log.withLock { entries in
                for r in records {
                    entries.append((id, r.dynamodb.keys["key"]!.stringValue!, Int(r.dynamodb.sequenceNumber.dropFirst().prefix(20))!))
                }
            }
        }
        let dispatchers = try (1...2).map { id in
            try kafka.dispatcher([StreamTriggerRegistration(name: "ordered", table: "objects",
                                                            mapping: EventSourceMapping(batchSize: 7),
                                                            handler: Recorder(id: id, log: append))], logger: logger)
        }
        let running = dispatchers.map { d in Task { await d.run() } }
        // Both join the group and split the 4 partitions before anything is sent.
        let split = await eventually(timeout: 90) {
            let owned = dispatchers.map { $0.streamAssignments["ordered"] ?? [] }
            return owned.allSatisfy { !$0.isEmpty } && owned.reduce(0) { $0 + $1.count } == 4
        }
        #expect(split, "partitions: \(dispatchers.map { $0.streamAssignments })")
        let keys = (0..<12).map { "key-\($0)" }
        var records: [DynamoDBEvent.Record] = []
        for seq in 0..<300 { records.append(Self.record(keys[seq % keys.count], seq)) }
        try await kafka.send(records)
        _ = await eventually(timeout: 60) { Set(log.withLock { $0.map(\.seq) }).count >= 300 }
        running.forEach { $0.cancel() }
        for task in running { await task.value }
        let entries = log.withLock { $0 }
        #expect(Set(entries.map(\.seq)).count == 300)
        for key in keys {
            let seqs = entries.filter { $0.key == key }.map(\.seq)
            #expect(seqs == seqs.sorted(), "records of \(key) out of order: \(seqs)")
        }
        let perDispatcher = Dictionary(grouping: entries, by: \.dispatcher).mapValues(\.count)
        #expect(perDispatcher.count == 2, "both dispatchers had partitions: \(perDispatcher)")
    }

    /// Runs `trigger`, sends `raw` messages (key, value) to the stream and then
    /// one good record (`after#1`); returns the trigger's dead letters once the
    /// good record has been handled.
    func deadLettersAfter(_ raw: [(key: String, value: String)], trigger: StreamTriggerRegistration,
                          handler: Scripted) async throws -> [Kcat.Record] {
        let kafka = try Cluster(partitions: 1, logger: logger)
        let dispatcher = try kafka.dispatcher([trigger], logger: logger)
        let running = Task { await dispatcher.run() }
        for message in raw {
            try await kafka.producer.send(topic: kafka.topics.streams, key: message.key, value: Array(message.value.utf8))
        }
        try await kafka.send([Self.record("after", 1)])
        _ = await eventually(timeout: 90) { !handler.seen.isEmpty }
        let dlq = try await kafka.kcat.consumeAll(topic: kafka.topics.triggersDLQ)
        running.cancel()
        await running.value
        #expect(handler.seen == [["after#1"]])
        return dlq
    }

    @Test func undecodableRecordsGoToTheDestinationAndDoNotBlock() async throws {
        let handler = Scripted()
        let trigger = StreamTriggerRegistration(name: "robust", table: "objects", handler: handler)
        let dlq = try await deadLettersAfter([("objects/b/x", "{garbage")], trigger: trigger, handler: handler)
        #expect(dlq.count == 1)
        #expect(dlq.first?.value.contains("UndecodableRecord") == true)
    }

    /// A trigger passes over another table's records by their key, before
    /// decoding: even an undecodable one is not this trigger's to dead-letter.
    @Test func anotherTablesRecordsArePassedOverUndecoded() async throws {
        let handler = Scripted()
        let trigger = StreamTriggerRegistration(name: "objects-only", table: "objects", handler: handler)
        let dlq = try await deadLettersAfter([("transfers/t-1", "{garbage")], trigger: trigger, handler: handler)
        #expect(dlq.isEmpty, "\(dlq.map(\.value))")
        #expect(StreamMapping.table(keyedBy: Array("posts/p1/x".utf8)) == "posts")
        #expect(StreamMapping.table(keyedBy: Array("/x".utf8)) == nil)
        #expect(StreamMapping.table(keyedBy: nil) == nil)
    }

    /// Filters run on the record's JSON before it is decoded: what they drop is
    /// never decoded (a malformed record they drop goes nowhere), what they keep
    /// is decoded and, if malformed, dead-lettered.
    @Test func filtersRunBeforeDecoding() async throws {
        let handler = Scripted()
        let filters = try FilterCriteria(patterns: [#"{"eventName":["INSERT"]}"#])
        let trigger = StreamTriggerRegistration(name: "inserts", table: "objects", mapping: EventSourceMapping(filterCriteria: filters),
                                                handler: handler)
        let dlq = try await deadLettersAfter([("objects/b/dropped", #"{"eventName":"REMOVE"}"#),
                                              ("objects/b/kept", #"{"eventName":"INSERT"}"#)], trigger: trigger, handler: handler)
        #expect(dlq.count == 1, "\(dlq.map(\.value))")
        #expect(dlq.first?.value.contains("UndecodableRecord") == true)
    }

    /// A record that names `eventName` twice could pass the filter on one value
    /// (its reader keeps the last) and reach the handler with the other (the
    /// decoder keeps the first): it is dead-lettered before either reads it.
    @Test func aRecordNamingAMemberTwiceIsNeitherFilteredNorHandled() async throws {
        let handler = Scripted()
        let filters = try FilterCriteria(patterns: [#"{"eventName":["INSERT"]}"#])
        let trigger = StreamTriggerRegistration(name: "inserts", table: "objects", mapping: EventSourceMapping(filterCriteria: filters),
                                                handler: handler)
        let remove = String(decoding: try JSONEncoder().encode(Self.record("twice", 1, name: .remove)), as: UTF8.self)
        #expect(remove.contains(#""eventName":"REMOVE""#))
        let twice = remove.replacingOccurrences(of: #""eventName":"REMOVE""#, with: #""eventName":"REMOVE","eventName":"INSERT""#)
        let dlq = try await deadLettersAfter([("objects/b/twice", twice)], trigger: trigger, handler: handler)
        #expect(dlq.count == 1, "\(dlq.map(\.value))")
        #expect(dlq.first?.value.contains("UndecodableRecord") == true)
        #expect(dlq.first?.value.contains("appears more than once") == true, "\(dlq.map(\.value))")
    }
}
