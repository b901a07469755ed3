import Logging
import Synchronization

/// A logger whose lines ("LEVEL message") are kept for a test to read.
public final class RecordedLog: Sendable {
    public let lines = Mutex<[String]>([])

    public init() {}

    public func logger(label: String) -> Logger {
        Logger(label: label) { _ in Recorder(sink: self) }
    }

    /// The lines so far, and none kept after.
    public func take() -> [String] {
        lines.withLock { lines in defer { lines.removeAll() }; return lines }
    }

    struct Recorder: LogHandler {
        let sink: RecordedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            sink.lines.withLock { $0.append("\(event.level) \(event.message)") }
        }
    }
}
