import FerryCore
import Foundation
import Testing

@Suite struct ProcessStatusTests {
    /// The fields the gauges and `ferry reconcile` read, in their units.
    @Test func readsMemoryAndThreadsOfThisProcess() throws {
        let before = ProcessStatus.read()
        let rss = try #require(before["VmRSS"]), peak = try #require(before["VmHWM"])
        #expect(rss > 1024 && peak >= rss, "VmRSS \(rss) kB, VmHWM \(peak) kB")
        // 64 MiB touched page by page must show up in the peak (the resident
        // size itself moves with whatever the other tests free meanwhile).
        let block = UnsafeMutableRawPointer.allocate(byteCount: 64 << 20, alignment: 4096)
        defer { block.deallocate() }
        for page in stride(from: 0, to: 64 << 20, by: 4096) { block.storeBytes(of: 1, toByteOffset: page, as: UInt8.self) }
        let peakAfter = try #require(ProcessStatus.read()["VmHWM"])
        #expect(peakAfter >= 64 * 1024, "VmHWM \(peakAfter) kB after touching 64 MiB")
        #expect(try #require(before["Threads"]) >= 1)
    }
}
