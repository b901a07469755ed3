import CFerryProcess
import FerryCore
import Metrics

/// The process's own memory and threads, read when /metrics is scraped.
/// Resident size alone cannot tell a leak from a high-water mark (freed heap
/// stays resident), so the allocator's in-use bytes are given beside it.
enum ProcessGauges {
    static func update() {
        Gauge(label: "ferry_process_heap_in_use_bytes").record(Int(clamping: ferry_heap_in_use_bytes()))
        let status = ProcessStatus.read()
        if let kB = status["VmRSS"] { Gauge(label: "ferry_process_resident_memory_bytes").record(kB &* 1024) }
        if let threads = status["Threads"] { Gauge(label: "ferry_process_threads").record(threads) }
    }
}
