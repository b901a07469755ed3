@testable import FerryWorker
import FerryCore
import Foundation
import Testing

/// What `HeapTrimmer` is for: memory a thread freed stays resident in its
/// arena while a few blocks still live among it; a trim gives it back.
@Suite struct HeapTrimmerTests {
    static func residentMiB() -> Int { (ProcessStatus.read()["VmRSS"] ?? 0) / 1024 }

    @Test func freedHeapStaysResidentUntilTrimmed() async throws {
        // On a thread of its own (its own arena), like the blocking pool's:
        // 256 MiB in 1 KiB blocks, all freed but one in 64.
        let pool = BlockingPool(threads: 1, name: "trim-test")
        let before = Self.residentMiB()
        let kept = await pool.run { () -> [UInt] in
            var blocks: [UnsafeMutableRawPointer] = []
            blocks.reserveCapacity(1 << 18)
            for _ in 0..<(1 << 18) {
                let block = UnsafeMutableRawPointer.allocate(byteCount: 1024, alignment: 8)
                block.initializeMemory(as: UInt8.self, repeating: 1, count: 1024)
                blocks.append(block)
            }
            var kept: [UInt] = []
            for (i, block) in blocks.enumerated() {
                if i % 64 == 0 { kept.append(UInt(bitPattern: block)) } else { block.deallocate() }
            }
            return kept
        }
        let freed = Self.residentMiB()
        #expect(freed - before > 150, "RSS \(before) -> \(freed) MiB: the freed blocks stay resident")
        await HeapTrimmer.trimNow()
        let trimmed = Self.residentMiB()
        #expect(freed - trimmed > 150, "RSS \(freed) -> \(trimmed) MiB after the trim")
        await pool.run { for address in kept { UnsafeMutableRawPointer(bitPattern: address)!.deallocate() } }
    }
}
