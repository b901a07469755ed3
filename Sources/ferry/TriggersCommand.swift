import ArgumentParser
import FerryCore
import FerryEngine
import FerryTriggers
import Foundation
import Logging

struct TriggersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "triggers",
        abstract: "Inspect and try the trigger handlers registered in triggers/.",
        discussion: "Examples:\n  ferry triggers list\n  ferry triggers test audit-log --event event.json --data-root ./ferry-data",
        subcommands: [TriggersListCommand.self, TriggersTestCommand.self])
}

struct TriggersListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List registered handlers with their sources, filters and delivery settings.",
        discussion: "Example:\n  ferry triggers list")

    @Option(name: .customLong("data-root"), help: "Data root handed to the registrations (default ./ferry-data).")
    var dataRoot = "ferry-data"

    func run() async throws {
        try FileManager.default.createDirectory(atPath: dataRoot, withIntermediateDirectories: true)
        let registry = try TriggerSetup.registry(dataRoot: try configured { try DataRoot(dataRoot) }, region: "us-east-1")
        print("NAME\tEVENTS\tPREFIX\tSUFFIX\tRETRIES\tTIMEOUT")
        for t in registry.s3Triggers {
            print([t.name, t.events.map(\.pattern).joined(separator: ","), t.prefix.isEmpty ? "-" : t.prefix,
                   t.suffix.isEmpty ? "-" : t.suffix, String(t.delivery.maximumRetryAttempts),
                   String(format: "%.0fs", t.delivery.timeoutSeconds)].joined(separator: "\t"))
        }
    }
}

struct TriggersTestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Invoke one handler with an S3 event from a JSON file and print the result (like sam local invoke).",
        discussion: """
            The event is decoded as Lambda receives it; records the handler's filter does not match are reported and skipped.
            Example:
              ferry triggers test audit-log --event Tests/events/put.json --data-root ./ferry-data
            Exit codes: 0 the handler succeeded; 1 it threw or timed out; 64 bad usage or an undecodable event.
            """)

    @Argument(help: "Handler name (see ferry triggers list).") var name: String
    @Option(help: "JSON file holding an S3 event.") var event: String
    @Option(name: .customLong("data-root"), help: "Data root handed to the handler (default ./ferry-data).") var dataRoot = "ferry-data"

    func run() async throws {
        try FileManager.default.createDirectory(atPath: dataRoot, withIntermediateDirectories: true)
        let root = try configured { try DataRoot(dataRoot) }
        let registry = try TriggerSetup.registry(dataRoot: root, region: "us-east-1")
        guard let trigger = registry.s3Triggers.first(where: { $0.name == name }) else {
            throw ValidationError("no handler named '\(name)'; registered: \(registry.s3Triggers.map(\.name).joined(separator: ", "))")
        }
        guard let data = FileManager.default.contents(atPath: event) else { throw ValidationError("cannot read \(event)") }
        let decoded: S3Event
        do { decoded = try JSONDecoder().decode(S3Event.self, from: data) } catch {
            throw ValidationError("\(event) is not an S3 event: \(error)")
        }
        let matching = decoded.records.filter(trigger.matches)
        let skipped = decoded.records.count - matching.count
        if skipped > 0 { print("\(skipped) record(s) do not match \(name)'s filter and are skipped") }
        guard !matching.isEmpty else { print("nothing to invoke"); return }
        let context = TriggerContext(requestId: UUID().uuidString, handlerName: name, attempt: 1,
                                     deadline: Date().addingTimeInterval(trigger.delivery.timeoutSeconds),
                                     logger: Logger(label: "ferry.triggers.test"),
                                     environment: TriggerEnvironment(dataRoot: URL(fileURLWithPath: root.path), region: "us-east-1"))
        let started = Date()
        do {
            try await trigger.handler.handle(S3Event(records: matching), context: context)
            print(String(format: "%@ succeeded in %.0f ms with %d record(s)", name, Date().timeIntervalSince(started) * 1000, matching.count))
        } catch {
            print("\(name) failed: \(error)")
            throw ExitCode.failure
        }
    }
}
