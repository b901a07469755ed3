import CFerryProcess
import FerryCore
import FerryS3
import FerryStorage
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
        // How full the MD5 lanes of downloads ran since the start (8 at most; 1 is one file at a time).
        if let perBatch = MD5Lanes.shared.filesPerBatch { Gauge(label: "ferry_md5_files_per_batch").record(perBatch) }
    }
}
