import FerryCore
import ArgumentParser
import FerryClient
import Foundation
import Synchronization

/// `ferry status ID`: the latest status of one transfer, read from `<prefix>.status`.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Print the latest status of a transfer (from the status topic).",
        discussion: """
            Exit codes: 0 completed, or still in progress; 1 failed, cancelled or rejected;
            2 no status for that id (unknown, or expired from the topic).

            Examples:
              ferry status job-42 --bootstrap-servers kafka:9092
              ferry status job-42 --json | jq .bytesTransferred
            """)

    @Argument(help: "Transfer id.") var id: String
    @Flag(help: "Print the status JSON as published.") var json = false
    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var log: LogOptions

    func run() async throws {
        if let problem = RequestDecoder.idProblem(id) { throw ValidationError(problem.message) }
        let client = try statusClient(kafka: kafka, log: log, label: "ferry.status")
        guard let status = try await client.status(of: id) else {
            printError("no status for \(id) on \(kafka.topics.status)")
            throw ExitCode(2)
        }
        if json {
            print(TerminalText.visibleJSON(String(decoding: try FerryJSON.encodeSorted(status), as: UTF8.self)))
        } else {
            print(ProgressDisplay.line(status))
        }
        if [.failed, .cancelled, .rejected].contains(status.state) { throw ExitCode(FerryExit.transferNotCompleted) }
    }
}

/// `ferry watch`: a live table of transfers from `<prefix>.status`.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Watch transfers live: a table redrawn on a terminal, one line per status otherwise.",
        discussion: """
            Examples:
              ferry watch --bootstrap-servers kafka:9092
              ferry watch --from-beginning --for 60 > statuses.log
            """)

    @Flag(name: .customLong("from-beginning"), help: "Start with the statuses the topic still holds, not only new ones.")
    var fromBeginning = false
    @Option(name: .customLong("for"), help: "Stop after this many seconds (default: until interrupted).")
    var duration: Double?
    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var log: LogOptions

    func validate() throws { try requireRange(duration, waitSeconds, "--for") }

    func run() async throws {
        let client = try statusClient(kafka: kafka, log: log, label: "ferry.watch")
        let statuses = try await client.allStatuses(fromBeginning: fromBeginning)
        let table = TransferTable(live: isatty(STDOUT_FILENO) == 1)
        if !table.live { print("watching \(kafka.topics.status)"); flushStandardOutput() }
        let watching = Task {
            for await status in statuses { table.update(status) }
        }
        let redraw = Task {
            while !Task.isCancelled && table.live {
                table.draw()
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
        if let duration {
            try? await Task.sleep(for: .seconds(clamping: duration))
            watching.cancel()
        }
        await watching.value
        redraw.cancel()
        if table.live { table.draw() }
    }
}

/// `ferry transfers`: every transfer of the fleet with its latest state.
struct TransfersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transfers",
        abstract: "List the fleet's transfers with their latest state (read from the status topic).",
        discussion: """
            One line per transfer id, newest first: id, state, op, bytes, worker, time, and the
            error of a failed one. Every worker's transfers are listed, finished ones too
            (as long as the status topic holds them).

            Examples:
              ferry transfers --state running,paused --bootstrap-servers kafka:9092
              ferry transfers --json | jq -r 'select(.state=="failed") | .id'
            """)

    @Option(help: "Only these states, comma-separated: accepted, running, paused, completed, failed, cancelled, rejected.")
    var state: String?
    @Flag(help: "One status JSON per line, as published.") var json = false
    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var log: LogOptions

    func run() async throws {
        var wanted: Set<TransferStatus.State>?
        if let state {
            var parsed: Set<TransferStatus.State> = []
            for name in state.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
                guard let value = TransferStatus.State(rawValue: name) else {
                    throw ValidationError("unknown state '\(name)': use accepted, running, paused, completed, failed, cancelled or rejected")
                }
                parsed.insert(value)
            }
            wanted = parsed
        }
        let client = try statusClient(kafka: kafka, log: log, label: "ferry.transfers")
        let transfers = try await client.list(states: wanted)
        if json {
            for status in transfers { print(TerminalText.visibleJSON(String(decoding: try FerryJSON.encodeSorted(status), as: UTF8.self))) }
            return
        }
        let shown = transfers.map(\.visible)
        // Ids are printed whole, so each can be pasted into status, pause or cancel.
        let idWidth = max(28, shown.map(\.id.count).max() ?? 0)
        print(Column.padded("ID", idWidth) + " STATE      OP        BYTES             WORKER               TIME")
        for status in shown {
            let bytes = status.totalBytes.map { "\(status.bytesTransferred ?? 0)/\($0)" } ?? "\(status.bytesTransferred ?? 0)"
            let line = [Column.padded(status.id, idWidth), Column.padded(status.state.rawValue, 10),
                        Column.padded(status.op ?? "-", 9), Column.padded(bytes, 17),
                        Column.padded(status.worker ?? "-", 20), status.time].joined(separator: " ")
            print(line + (status.error.map { "  \($0.code): \($0.message)" } ?? ""))
        }
        print("\(transfers.count) transfer(s)")
    }
}

/// A producer-side client for the status commands; they log only warnings unless told otherwise.
private func statusClient(kafka: KafkaOptions, log: LogOptions, label: String) throws -> TransferClient {
    var log = log
    if log.level == nil && setting(.logLevel) == nil { log.level = "warning" }
    let logger = try log.bootstrap(label: label)
    let configuration = try kafka.configuration()
    return try TransferClient(bootstrapServers: configuration.properties["bootstrap.servers"]!,
                              properties: configuration.properties, topics: kafka.topics, logger: logger)
}

/// The latest status of each transfer seen; a terminal redraws it as a table.
/// It keeps the newest `kept` (the table shows 40), so a watch that runs for
/// days over a busy fleet holds no more than that; off a terminal, where each
/// status is a line, it keeps none.
final class TransferTable: Sendable {
    let live: Bool
    private let rows = Mutex<[String: TransferStatus]>([:])
    static let kept = 1000

    init(live: Bool) { self.live = live }

    func update(_ status: TransferStatus) {
        guard live else {
            print(ProgressDisplay.line(status))
            flushStandardOutput()
            return
        }
        rows.withLock { rows in
            rows[status.id] = status
            guard rows.count > 2 * Self.kept else { return }
            let newest = rows.values.sorted { ($0.time, $0.id) > ($1.time, $1.id) }.prefix(Self.kept)
            rows = Dictionary(uniqueKeysWithValues: newest.map { ($0.id, $0) })
        }
    }

    func draw() {
        let shown = rows.withLock { Array($0.values) }.sorted { ($0.time, $0.id) > ($1.time, $1.id) }.prefix(40)
        var text = "\u{1B}[H\u{1B}[2J"
        let visible = shown.map(\.visible)
        // The id column fits the longest id shown: an id cut short could not be pasted into `ferry pause`.
        let idWidth = max(24, (visible.map(\.id.count).max() ?? 0) + 1)
        text += Self.row(idWidth, "ID", "OP", "STATE", "PROGRESS", "WORKER", "OBJECT / ERROR") + "\n"
        for s in visible {
            let progress: String
            if let done = s.bytesTransferred {
                let pct = s.totalBytes.flatMap { $0 > 0 ? String(format: " %3.0f%%", Double(done) * 100 / Double($0)) : nil } ?? ""
                progress = ProgressDisplay.bytes(done) + pct
            } else {
                progress = "-"
            }
            let detail = s.error.map { "\($0.code): \($0.message)" } ?? s.object.map { "s3://\($0.bucket)/\($0.key)" } ?? ""
            text += Self.row(idWidth, s.id, s.op ?? "-", s.state.rawValue, progress, s.worker ?? "-", detail) + "\n"
        }
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// One line of the table: the id whole in its column, the other cells cut to theirs, the last one whole.
    static func row(_ idWidth: Int, _ cells: String...) -> String {
        let widths = [idWidth, 9, 10, 18, 20, 0]
        return zip(cells, widths).enumerated().map { index, pair in
            let (cell, width) = pair
            if width == 0 || index == 0 { return width == 0 ? cell : Column.padded(cell, width) }
            return Column.padded(String(cell.prefix(width - 1)), width)
        }.joined()
    }
}

/// Padding for the status commands' columns. Foundation's `padding(toLength:)`
/// also cuts a longer text, which made a 36-character UUID a 28-character
/// fragment that no command could find again.
enum Column {
    static func padded(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
