import ArgumentParser
import FerryCore
import Foundation
import Logging
import FerryConcurrency

@main
struct Ferry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry",
        abstract: "Kafka-fed transfer workers for S3-compatible storage, with Lambda-style triggers.",
        discussion: """
            Exit codes: 0 success; 1 a transfer ended failed, cancelled or rejected (or the demo failed); \
            2 ferry status found no status for the id; 3 a wait timed out; \
            64 bad usage or configuration (with the reason on stderr).
            """,
        version: FerryVersion.current,
        subcommands: [DevCommand.self, WorkerCommand.self, EnqueueCommand.self, CopyCommand.self, PresignCommand.self, UploadsCommand.self,
                      PauseCommand.self, ResumeCommand.self, CancelCommand.self, TriggersCommand.self, ConfigCommand.self, StatusCommand.self, TransfersCommand.self, WatchCommand.self, ReconcileCommand.self, ItemsCommand.self,
                      VersionCommand.self]
    )

    /// ArgumentParser's own `main`, except that what it prints of an error goes
    /// through `TerminalText` line by line: its messages repeat the values they
    /// refuse (`The value '…' is invalid`, `'…' is no transfer id`), and a value
    /// may hold escape sequences that would drive the user's terminal, and
    /// any length (an error line is clipped; help is printed whole).
    static func main() async {
        ProcessLogging.install()
        var parsed: (any ParsableCommand.Type)?
        do {
            var command = try parseAsRoot()
            parsed = type(of: command)
            if var asyncCommand = command as? AsyncParsableCommand { try await asyncCommand.run() } else { try command.run() }
            finishBlockingWork()
        } catch {
            finishBlockingWork()
            let message = parsed.flatMap { usageError(error, of: $0) } ?? fullMessage(for: error)
            let code = exitCode(for: error)
            if !message.isEmpty {
                let shown = message.split(separator: "\n", omittingEmptySubsequences: false)
                    .map { code == .success ? TerminalText.visible(String($0)) : ErrorLine.shown(String($0)) }.joined(separator: "\n") + "\n"
                (code == .success ? FileHandle.standardOutput : FileHandle.standardError).write(Data(shown.utf8))
            }
            Foundation.exit(code.rawValue)
        }
    }
}

extension Ferry {
    /// Blocking work still queued when a command ends (a download's fsync, a
    /// Kafka commit, the local store's index write) runs before the process
    /// exits, and the pool's threads end; a job stuck past 10 s is left behind,
    /// said so, rather than holding the exit.
    static func finishBlockingWork() {
        if !BlockingPool.shutdownShared(within: .seconds(10)) {
            Logger(label: "ferry").warning("blocking work still running 10 s after the command ended; exiting without it")
        }
    }

    /// A usage error a subcommand's `run()` throws (a value out of range, an id
    /// no request may carry) with that subcommand's usage line, as
    /// ArgumentParser shows for the errors it finds itself; its own rendering
    /// of an error thrown after parsing names only `ferry <subcommand>`.
    static func usageError(_ error: any Error, of command: any ParsableCommand.Type) -> String? {
        guard error is ValidationError, command != Ferry.self else { return nil }
        let usage = usageString(for: command)
        // "ferry items put [<options>] --table …": the command's path is the words before its first argument.
        let path = usage.split(separator: " ").prefix { !($0.hasPrefix("[") || $0.hasPrefix("<") || $0.hasPrefix("-")) }
        return """
            Error: \(message(for: error))
            Usage: \(usage)
              See '\(path.joined(separator: " ")) --help' for more information.
            """
    }
}

enum FerryVersion {
    static let current = "0.1.0"
}

/// Process exit codes documented in `ferry --help` and docs/cli.md
/// (usage and configuration errors exit 64, ArgumentParser's EX_USAGE).
enum FerryExit {
    static let transferNotCompleted: Int32 = 1
    static let timedOut: Int32 = 3
}
