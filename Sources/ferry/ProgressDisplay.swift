import FerryCore
import Foundation
import Synchronization

/// Shows transfer statuses: a redrawn progress bar on a terminal, one plain
/// line per status otherwise (logs, pipes, CI).
final class ProgressDisplay: Sendable {
    private let label: String
    private let isTerminal = isatty(STDOUT_FILENO) == 1
    private let barShown = Mutex(false)

    init(label: String) { self.label = label }

    func show(_ status: TransferStatus) {
        if isTerminal && status.state == .running {
            let done = status.bytesTransferred ?? 0
            let total = status.totalBytes ?? 0
            // Clamped: the numbers come from the status topic, which anyone with access can write.
            let fraction = total > 0 ? min(1, max(0, Double(done) / Double(total))) : 0
            let width = 30
            let filled = Int(fraction * Double(width))
            let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
            let text = String(format: "\r%@ [%@] %3.0f%% %@/%@", label, bar, fraction * 100, Self.bytes(done), Self.bytes(total))
            barShown.withLock { $0 = true }
            FileHandle.standardOutput.write(Data(text.utf8))
            return
        }
        let newline = barShown.withLock { shown in defer { shown = false }; return shown } ? "\n" : ""
        print(newline + Self.line(status))
        flushStandardOutput()
    }

    func finish(message: String) {
        let newline = barShown.withLock { $0 } ? "\n" : ""
        // The message may carry a store's words (an error): never its control characters.
        print(newline + TerminalText.visible(message))
    }

    /// The last line of a command that did not succeed: on stderr, where a
    /// script that keeps stdout for results looks for the reason (the bar's
    /// line on stdout is ended first).
    func fail(message: String) {
        if barShown.withLock({ $0 }) { print("") }
        flushStandardOutput()
        printError(message)
    }

    static func line(_ status: TransferStatus) -> String {
        let s = status.visible
        var parts = ["\(s.time) \(s.id) \(s.state.rawValue)"]
        if let done = s.bytesTransferred {
            parts.append(s.totalBytes.map { "\(bytes(done))/\(bytes($0))" } ?? bytes(done))
        }
        if let object = s.object {
            parts.append("s3://\(object.bucket)/\(object.key)")
            if let eTag = object.eTag { parts.append("eTag \(eTag)") }
        }
        if let worker = s.worker { parts.append("on \(worker)") }
        if let error = s.error { parts.append("error \(error.code): \(error.message)") }
        return parts.joined(separator: "  ")
    }

    static func bytes(_ n: Int64) -> String {
        if n < 1024 { return "\(n) B" }
        if n < 1 << 20 { return String(format: "%.1f KiB", Double(n) / 1024) }
        if n < 1 << 30 { return String(format: "%.1f MiB", Double(n) / 1048576) }
        return String(format: "%.2f GiB", Double(n) / 1073741824)
    }
}
