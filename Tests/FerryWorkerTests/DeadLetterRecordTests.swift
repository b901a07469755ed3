import FerryCore
import FerryS3
import FerryStorage
import FerryStore
@testable import FerryWorker
import Foundation
import PropertyBased
import Testing
import FerryConcurrency

/// Every refused message gets a dead letter that fits the broker, and says
/// what it left out.
@Suite struct DeadLetterRecordTests {
    let headers = [OutboxMessage.Header(DLQHeader.errorCode, "RequestTooLarge"),
                   OutboxMessage.Header(DLQHeader.errorMessage, "request is too large"),
                   OutboxMessage.Header(DLQHeader.sourcePartition, "3"), OutboxMessage.Header(DLQHeader.sourceOffset, "42")]

    /// Invariant: the record is within the limit whatever the sizes of key,
    /// value and error message; a cut value names its original length and SHA-256.
    @Test func recordsAlwaysFit() async {
        let sizes = Gen.int(in: 0...1_200_000)
        let keySizes = Gen.int(in: 0...20_000)
        let limits = Gen<Int?>.element(of: [DeadLetterRecord.defaultMaxBytes, 100_000, 4096]).map { $0 ?? 4096 }
        await propertyCheck(count: 60, input: sizes, keySizes, limits) { size, keySize, limit in
            // Yields between inputs: the checks are long synchronous loops, and on two cores
            // (ThreadSanitizer: for a minute) they held the cooperative pool from the other tests.
            await Task.yield()
            let value = [UInt8](repeating: 0x61, count: size)
            let key = [UInt8](repeating: 0x6B, count: keySize)
            var headers = self.headers
            headers[1].value = String(repeating: "m", count: size % 5000)
            let record = DeadLetterRecord.make(topic: "ferry.requests.dlq", key: key, value: value, headers: headers, maxBytes: limit)
            #expect(record.recordBytes <= limit)
            let truncated = record.headers.contains { $0.name == DLQHeader.truncated && $0.value == "true" }
            if truncated {
                #expect(record.headers.first { $0.name == DLQHeader.originalLength }?.value == String(size))
                #expect(record.headers.first { $0.name == DLQHeader.originalSHA256 }?.value == Digest.sha256(value).hexString)
                #expect(value.starts(with: record.value))
            } else {
                #expect(record.value == value)
            }
            if keySize > min(DeadLetterRecord.maxKeyBytes, limit / 4) {
                #expect(record.key?.count == min(DeadLetterRecord.maxKeyBytes, limit / 4))
                #expect(record.headers.contains { $0.name == DLQHeader.originalKeyLength && $0.value == String(keySize) })
            }
        }
    }

    @Test func shrinkingAgainKeepsTheFirstOriginalLength() {
        let value = [UInt8](repeating: 0x62, count: 500_000)
        let first = DeadLetterRecord.make(topic: "t", key: nil, value: value, headers: headers, maxBytes: 300_000)
        let second = DeadLetterRecord.shrunk(first, toAtMost: first.recordBytes / 4)
        #expect(second.recordBytes <= first.recordBytes / 4)
        #expect(second.headers.filter { $0.name == DLQHeader.originalLength }.map(\.value) == ["500000"])
        let empty = DeadLetterRecord.shrunk(second, toAtMost: 0)
        #expect(empty.value.isEmpty)
    }

    @Test func theLimitFollowsTheProducersMessageMaxBytes() {
        #expect(DeadLetterRecord.maxBytes(producerProperties: [:]) == DeadLetterRecord.defaultMaxBytes)
        #expect(DeadLetterRecord.maxBytes(producerProperties: ["message.max.bytes": "200000"]) == 190_000)
        #expect(DeadLetterRecord.maxBytes(producerProperties: ["message.max.bytes": "nonsense"]) == DeadLetterRecord.defaultMaxBytes)
    }
}

/// Suspects run alone; ordinary requests side by side.
@Suite struct IsolationGateTests {
    @Test func anExclusiveHolderRunsAloneAndGoesFirst() async {
        let gate = IsolationGate()
        await gate.enter(exclusive: false)
        await gate.enter(exclusive: false)
        let exclusiveIn = Task { await gate.enter(exclusive: true); return gate.holders }
        try? await Task.sleep(for: .milliseconds(50))
        // A new ordinary request waits behind the waiting suspect.
        let sharedLater = Task { await gate.enter(exclusive: false); return gate.holders }
        try? await Task.sleep(for: .milliseconds(50))
        #expect(gate.holders.shared == 2 && !gate.holders.exclusive)
        gate.leave(exclusive: false)
        gate.leave(exclusive: false)
        let whileExclusive = await exclusiveIn.value
        #expect(whileExclusive.shared == 0 && whileExclusive.exclusive)
        gate.leave(exclusive: true)
        let after = await sharedLater.value
        #expect(after.shared == 1 && !after.exclusive)
        gate.leave(exclusive: false)
        #expect(gate.holders.shared == 0)
    }
}
