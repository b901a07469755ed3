@testable import FerryKafka
import Testing

/// A held partition keeps, of what it is given, exactly a prefix in offset
/// order, at most `limit` long, and names the first offset it let go: so
/// after the release's seek nothing is lost and nothing comes twice.
@Suite struct HeldPartitionTests {
    /// SplitMix64: seeded, so a failure names the seed that reproduces it.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    func message(_ offset: Int64) -> KafkaMessage {
        KafkaMessage(topic: "t", partition: 0, offset: offset, key: nil, value: [])
    }

    func check(_ held: HeldPartition, given offsets: [Int64], seed: UInt64) {
        let sorted = Array(Set(offsets)).sorted()
        let kept = held.messages.map(\.offset)
        #expect(kept.count <= HeldPartition.limit, "seed \(seed)")
        let prefix = Array(sorted.prefix(kept.count)) == kept
        #expect(prefix, "seed \(seed): \(kept.count) kept are not the first \(kept.count) of \(sorted.count) offsets given, in order")
        #expect(held.refetchFrom == (kept.count < sorted.count ? sorted[kept.count] : nil), "seed \(seed): refetch point")
    }

    @Test func keepsAnOrderedPrefixAndNamesTheFirstOffsetLetGo() {
        for seed in UInt64(0)..<400 {
            var random = Seeded(state: seed)
            // The given-back message first, then what arrives in order, with
            // gaps (compaction, transaction markers); now and then an earlier
            // one given back again (a hold asked twice), even one set aside already.
            var offset = Int64.random(in: 0...1_000_000, using: &random)
            var given = [offset]
            var held = HeldPartition(message(offset))
            for _ in 0..<Int.random(in: 0...1_200, using: &random) {
                offset += Int64.random(in: 1...3, using: &random)
                var next = offset
                if Int.random(in: 0..<200, using: &random) == 0, let earlier = given.randomElement(using: &random) { next = earlier - 1 }
                given.append(next)
                held.setAside(message(next))
            }
            check(held, given: given, seed: seed)
        }
    }
}
