import Foundation

/// This process's numeric fields from /proc/self/status, by name without the
/// colon: memory in kB (`VmRSS`, `VmHWM`), counts as they are (`Threads`).
/// Empty where /proc is not there.
public enum ProcessStatus {
    public static func read() -> [String: Int] {
        let text = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        var fields: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard parts.count >= 2, parts[0].hasSuffix(":"), let value = Int(parts[1]) else { continue }
            fields[String(parts[0].dropLast())] = value
        }
        return fields
    }
}
