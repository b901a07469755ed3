import FerryKafka
import FerryTestSupport
import Testing

@Suite struct RememberedMessagesTests {
    private func message(_ topic: String, _ partition: Int32, _ offset: Int64) -> KafkaMessage {
        KafkaMessage(topic: topic, partition: partition, offset: offset, key: nil, value: [])
    }

    /// Against a model (the last `capacity` distinct positions, oldest first
    /// out), over seeded runs of remembers with repeats, across topics and
    /// partitions that share offsets.
    @Test(arguments: [1, 7, 1024] as [UInt64])
    func remembersExactlyTheLastDistinctPositions(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        let capacity = Int.random(in: 1...16, using: &rng)
        let remembered = RememberedMessages(capacity: capacity)
        var model: [KafkaMessage] = []
        func same(_ a: KafkaMessage, _ b: KafkaMessage) -> Bool {
            a.topic == b.topic && a.partition == b.partition && a.offset == b.offset
        }
        let universe = (0..<40).map { _ in
            message(["a", "b"].randomElement(using: &rng)!, Int32.random(in: 0...1, using: &rng), Int64.random(in: 0...5, using: &rng))
        }
        for _ in 0..<500 {
            let batch = (0..<Int.random(in: 1...3, using: &rng)).map { _ in universe.randomElement(using: &rng)! }
            remembered.remember(batch)
            for m in batch where !model.contains(where: { same($0, m) }) { model.append(m) }
            if model.count > capacity { model.removeFirst(model.count - capacity) }
            for probe in universe {
                #expect(remembered.contains(probe) == model.contains { same($0, probe) },
                        "seed \(seed): \(probe.topic)/\(probe.partition)@\(probe.offset)")
            }
        }
    }

    @Test func containsAllWantsEveryOneAndSomeAtAll() {
        let remembered = RememberedMessages(capacity: 4)
        remembered.remember([message("t", 0, 1), message("t", 0, 2)])
        #expect(remembered.containsAll([message("t", 0, 1), message("t", 0, 2)]))
        #expect(!remembered.containsAll([message("t", 0, 1), message("t", 0, 3)]))
        #expect(!remembered.containsAll([message("t", 1, 1)]))
        #expect(!remembered.containsAll([KafkaMessage]()))
    }
}
