import FerryCore
import Logging

/// swift-log's text handler with what is logged made visible first
/// (`TerminalText`): a log line can carry others' words (a store's error
/// message, a peer's reason), and a newline or escape sequence in them would
/// fake log lines or drive the terminal of whoever tails the log. The JSON
/// format escapes them already.
struct VisibleTextLogHandler: LogHandler {
    private var inner: StreamLogHandler

    init(label: String) { inner = StreamLogHandler.standardError(label: label) }

    var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = Self.visible(newValue) }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { inner.metadataProvider }
        set { inner.metadataProvider = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue.map(Self.visible) }
    }

    func log(event: LogEvent) {
        var event = event
        event.message = "\(TerminalText.visible(event.message.description))"
        event.metadata = event.metadata.map(Self.visible)
        inner.log(event: event)
    }

    static func visible(_ metadata: Logger.Metadata) -> Logger.Metadata {
        metadata.mapValues(visible)
    }

    static func visible(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let text): .string(TerminalText.visible(text))
        case .stringConvertible(let convertible): .string(TerminalText.visible(convertible.description))
        case .array(let values): .array(values.map(visible))
        case .dictionary(let values): .dictionary(visible(values))
        }
    }
}
