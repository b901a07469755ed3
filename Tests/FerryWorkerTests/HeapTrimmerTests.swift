@testable import FerryWorker
import CFerryProcess
import FerryCore
import Foundation
import Testing
import FerryConcurrency

/// What `HeapTrimmer` is for: memory a thread freed stays resident in its
/// arena while a few blocks still live among it; a trim gives it back.
/// Residency is read page by page (`mincore`) for the freed blocks' own
/// pages, not from the process's RSS, which the tests running beside this
/// one move by as much as this test frees.
@Suite struct HeapTrimmerTests {
    static let pageSize = UInt(sysconf(Int32(_SC_PAGESIZE)))

    /// How many of `pages` (page numbers) are resident.
    static func resident(_ pages: [UInt]) -> Int {
        var state: UInt8 = 0
        return pages.reduce(0) { count, page in
            guard mincore(UnsafeMutableRawPointer(bitPattern: page * pageSize), Int(pageSize), &state) == 0 else { return count }
            return count + Int(state & 1)
        }
    }

    /// glibc's arenas only: under a sanitizer (`scripts/tsan.sh`) malloc is the
    /// sanitizer's allocator, which `malloc_trim` does not reach.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["FERRY_TEST_SANITIZER"] == nil, "malloc is the sanitizer's allocator"))
    func freedHeapStaysResidentUntilTrimmed() async throws {
        // On a thread of its own (its own arena), like the blocking pool's:
        // 256 MiB in 1 KiB blocks, all freed but one in 64.
        let pool = BlockingPool(threads: 1, name: "trim-test")
        let (kept, freedPages) = await pool.run { () -> ([UInt], [UInt]) in
            var blocks: [UnsafeMutableRawPointer] = []
            blocks.reserveCapacity(1 << 18)
            for _ in 0..<(1 << 18) {
                let block = UnsafeMutableRawPointer.allocate(byteCount: 1024, alignment: 8)
                block.initializeMemory(as: UInt8.self, repeating: 1, count: 1024)
                blocks.append(block)
            }
            func pages(_ address: UInt) -> ClosedRange<UInt> { (address / Self.pageSize)...((address + 1023) / Self.pageSize) }
            var kept: [UInt] = [], keptPages = Set<UInt>(), freedPages = Set<UInt>()
            for (i, block) in blocks.enumerated() {
                let address = UInt(bitPattern: block)
                if i % 64 == 0 {
                    kept.append(address)
                    keptPages.formUnion(pages(address))
                } else {
                    freedPages.formUnion(pages(address))
                    block.deallocate()
                }
            }
            // Only pages that held nothing but freed blocks (a kept block pins its page).
            return (kept, freedPages.subtracting(keptPages).sorted())
        }
        #expect(freedPages.count > 40_000, "\(freedPages.count) pages held only freed blocks")
        let before = await pool.run { Self.resident(freedPages) }
        #expect(Double(before) > 0.9 * Double(freedPages.count), "\(before) of \(freedPages.count) freed pages resident before the trim")
        await HeapTrimmer.trimNow()
        let after = await pool.run { Self.resident(freedPages) }
        #expect(Double(after) < 0.3 * Double(freedPages.count), "\(after) of \(freedPages.count) freed pages resident after the trim")
        await pool.run { for address in kept { UnsafeMutableRawPointer(bitPattern: address)!.deallocate() } }
    }

    /// Whether the block at `pointer` has a mapping of its own: glibc marks
    /// such a chunk with bit 1 (IS_MMAPPED) of the size word just before it.
    static func isMapped(_ pointer: UnsafeMutableRawPointer) -> Bool {
        (pointer - MemoryLayout<UInt>.size).load(as: UInt.self) & 2 != 0
    }

    /// With the threshold fixed, a block over it that no free space of the
    /// arena can serve is mapped, even after a larger mapped block was freed;
    /// left to glibc, that free raises the threshold past it (glibc's sliding
    /// threshold stops at 32 MiB, flag bits counted, hence blocks of 24 to
    /// 29 MiB after one of 30 MiB) and the block grows an arena instead (the mutant
    /// without the fix failed here: [false, false, false]). A round is decided
    /// only while the arenas hold less free space than the block: in the full
    /// suite other tests' free memory served both blocks (a fresh-clone CI run,
    /// [false, …]; 858 MiB free in the next), so a round waits for that, up to
    /// 10 s. Undecided, it is a known issue in the suite and a failure where
    /// `scripts/test.sh` runs these tests alone first (FERRY_TEST_QUIET_HEAP).
    /// An environment that sets the threshold is left alone.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["FERRY_TEST_SANITIZER"] == nil, "malloc is the sanitizer's allocator"))
    func largeBlocksKeepMappingsOfTheirOwn() async throws {
        #expect(HeapTrimmer.fixMmapThreshold(environment: ["GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=65536"]) == .environment)
        #expect(HeapTrimmer.fixMmapThreshold(environment: ["MALLOC_MMAP_THRESHOLD_": "65536"]) == .environment)
        #expect(HeapTrimmer.fixMmapThreshold(environment: [:]) == .fixed)
        let pool = BlockingPool(threads: 1, name: "mmap-test")
        let larger = 30 << 20
        let (mapped, free) = await pool.run { () -> ([Bool], Int) in
            var mapped: [Bool] = []
            var free = 0
            for attempt in 0..<40 where mapped.count < 3 {
                if attempt > 0 { Thread.sleep(forTimeInterval: 0.25) }
                free = ferry_heap_free_bytes()
                let size = max(24 << 20, free + (1 << 20)) + 4096 * mapped.count
                guard size < larger - (1 << 20) else { continue }
                let first = UnsafeMutableRawPointer.allocate(byteCount: larger, alignment: 16)
                first.storeBytes(of: UInt8(attempt), as: UInt8.self)
                first.deallocate()
                let block = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
                mapped.append(Self.isMapped(block))
                block.deallocate()
            }
            return (mapped, free)
        }
        #expect(mapped.allSatisfy { $0 }, "\(mapped)")
        if mapped.count < 3, ProcessInfo.processInfo.environment["FERRY_TEST_QUIET_HEAP"] != nil {
            Issue.record("\(mapped.count) of 3 rounds decided in a process of their own: the arenas held \(free) bytes free")
        } else if mapped.count < 3 {
            withKnownIssue("the arenas held \(free) bytes free for 10 s: which block a request gets cannot be told apart", isIntermittent: true) {
                Issue.record("\(mapped.count) of 3 rounds decided")
            }
        }
    }
}
