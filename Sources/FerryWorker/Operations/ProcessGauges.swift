import CFerryProcess
import Foundation
import Metrics

/// The process's own memory and threads, read when /metrics is scraped.
/// Resident size alone cannot tell a leak from a high-water mark (freed heap
/// stays resident), so the allocator's in-use bytes are given beside it.
enum ProcessGauges {
    static func update() {
        Gauge(label: "ferry_process_heap_in_use_bytes").record(Int(ferry_heap_in_use_bytes()))
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        for line in status.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, let value = Int(fields[1]) else { continue }
            switch fields[0] {
            case "VmRSS:": Gauge(label: "ferry_process_resident_memory_bytes").record(value * 1024)
            case "Threads:": Gauge(label: "ferry_process_threads").record(value)
            default: break
            }
        }
    }
}
