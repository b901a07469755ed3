import FerryCore
import FerryWorker
import Logging
import Synchronization

/// swift-log's one handler factory for the process, installed by `Ferry.main`
/// before any command runs. A command that never chose a level and format
/// (`ferry triggers test` runs handlers whose log lines repeat the event's
/// keys and ids) logged through swift-log's default handler, which prints
/// escape sequences as they are; now every logger is `VisibleTextLogHandler`
/// (or `JSONLogHandler`), at info until a command chooses otherwise.
enum ProcessLogging {
    private static let choice = Mutex<(level: Logger.Level, format: String)>((.info, "text"))

    static func install() {
        LoggingSystem.bootstrap { label in
            let (level, format) = choice.withLock { $0 }
            if format == "json" {
                var handler = JSONLogHandler(label: label)
                handler.logLevel = level
                return handler
            }
            var handler = VisibleTextLogHandler(label: label)
            handler.logLevel = level
            return handler
        }
    }

    /// The level and format of loggers made from now on (`--log-level`, `--log-format`).
    static func choose(level: Logger.Level, format: String) {
        choice.withLock { $0 = (level, format) }
    }
}
