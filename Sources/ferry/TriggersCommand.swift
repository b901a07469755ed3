import ArgumentParser
import FerryCore
import FerryEngine
import FerryTriggerKit
import FerryTriggers
import Foundation
import Synchronization
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
        discussion: "Handlers come from triggers/Registrations.swift and the 'triggers:' list of --config.\nExample:\n  ferry triggers list --config worker.yaml")

    @OptionGroup var config: ConfigFileOption
    @Option(name: .customLong("data-root"), help: "Data root handed to the registrations (default ./ferry-data).")
    var dataRoot = "ferry-data"
    @Option(name: .customLong("output-dir"), help: "Output directory handed to the registrations (default ./.ferry/trigger-output).")
    var outputDir = ".ferry/trigger-output"

    func run() async throws {
        try config.install()
        try FileManager.default.createDirectory(atPath: dataRoot, withIntermediateDirectories: true)
        let registry = try TriggerSetup.registry(dataRoot: try configured { try DataRoot(dataRoot) },
                                                 outputDirectory: URL(fileURLWithPath: outputDir), region: "us-east-1",
                                                 http: ProcessTransport.make())
        print("NAME\tSOURCE\tFILTER\tDELIVERY")
        for t in registry.s3Triggers {
            let filter = [t.prefix.isEmpty ? nil : "prefix=\(t.prefix)", t.suffix.isEmpty ? nil : "suffix=\(t.suffix)"].compactMap { $0 }
            let d = t.delivery
            print([t.name, "s3:" + t.events.map(\.pattern).joined(separator: ","), filter.isEmpty ? "-" : filter.joined(separator: " "),
                   "retries=\(d.maximumRetryAttempts) retryDelay=\(d.retryDelaySeconds)s maxEventAge=\(d.maximumEventAgeSeconds.clampedInt())s"
                   + " timeout=\(d.timeoutSeconds.clampedInt())s"
                   + " concurrency=\(d.maximumConcurrency.map(String.init) ?? "partitions")"].joined(separator: "\t"))
        }
        for t in registry.yielded {
            print("\(t.name)\tnot registered: \(t.reason)\t-\t-")
        }
        for t in registry.streamTriggers {
            let m = t.mapping
            print([t.name, "stream:\(t.table) \(t.viewType.rawValue)",
                   m.filterCriteria.isEmpty ? "-" : m.filterCriteria.sources.joined(separator: " OR "),
                   "batchSize=\(m.batchSize) window=\(m.maximumBatchingWindowSeconds)s retries=\(m.maximumRetryAttempts) retryDelay=\(m.retryDelaySeconds)s"
                   + " maxRecordAge=\(m.maximumRecordAgeSeconds.clampedInt())s bisect=\(m.bisectBatchOnFunctionError)"
                   + " reportBatchItemFailures=\(m.reportBatchItemFailures) onFailure=\(m.onFailureDestination ?? "<prefix>.triggers.dlq")"
                   + " timeout=\(m.timeoutSeconds.clampedInt())s concurrency=\(m.maximumConcurrency.map(String.init) ?? "partitions")"
                   + " start=\(m.startingPosition.rawValue)"].joined(separator: "\t"))
        }
    }
}

struct TriggersTestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Invoke one handler with an event from a JSON file and print the result (like sam local invoke).",
        discussion: """
            The file holds an S3 event (for S3 triggers) or a DynamoDB stream event (for stream triggers), as Lambda
            receives them. Records the handler's filters do not match are reported and skipped; stream records are
            shown to the handler in its view type. Transfers the handler enqueues are printed, not sent.
            Example:
              ferry triggers test audit-log --event triggers/events/s3-put.json --output-dir ./.ferry/trigger-output
            triggers/events/ holds events as Ferry sends them: s3-put, s3-delete, objects-insert, objects-remove, posts-insert.
            Exit codes: 0 the handler succeeded; 1 it threw, timed out or reported failed records; 64 bad usage or an undecodable event.
            """)

    @OptionGroup var config: ConfigFileOption
    @Argument(help: "Handler name (see ferry triggers list).") var name: String
    @Option(help: "JSON file holding an S3 event or a DynamoDB stream event.") var event: String
    @Option(name: .customLong("data-root"), help: "Data root handed to the handler (default ./ferry-data).") var dataRoot = "ferry-data"
    @Option(name: .customLong("output-dir"),
            help: "Directory of the handler's own files, as a worker's --trigger-output-dir (default ./.ferry/trigger-output).")
    var outputDir = ".ferry/trigger-output"

    func run() async throws {
        try config.install()
        try FileManager.default.createDirectory(atPath: dataRoot, withIntermediateDirectories: true)
        let root = try configured { try DataRoot(dataRoot) }
        let transport = ProcessTransport.make()
        let environment = TriggerEnvironment.worker(dataRoot: URL(fileURLWithPath: root.path), outputDirectory: URL(fileURLWithPath: outputDir),
                                                    region: "us-east-1", store: nil, transport: transport)
        let registry = try TriggerSetup.registry(environment: environment, transport: transport)
        let data = try CommandLineFile.data(event, "the event file")
        // A worker refuses an event that names a member twice (or is no JSON); so does the test.
        if let problem = StrictJSON.check(Array(data)) { throw ValidationError(problem.refusing(event)) }
        let recorded = RecordedTransfers()
        let sent = RecordedMessages()
        func context(timeout: Double, triggersCaller: @escaping @Sendable (String, String, String) -> Bool) -> TriggerContext {
            .local(handlerName: name, environment: environment, recorder: recorded, timeout: timeout,
                   logger: Logger(label: "ferry.triggers.test"), messages: sent, triggersCaller: triggersCaller)
        }
        let started = Date()
        var failed = false
        if let trigger = registry.s3Triggers.first(where: { $0.name == name }) {
            let decoded: S3Event
            do { decoded = try JSONDecoder().decode(S3Event.self, from: data) } catch {
                throw ValidationError("\(event) is not an S3 event: \(DecodingProblem.describe(error))")
            }
            let matching = decoded.records.filter(trigger.matches)
            let skipped = decoded.records.count - matching.count
            if skipped > 0 { print("\(skipped) record(s) do not match \(name)'s filter and are skipped") }
            guard !matching.isEmpty else { print("nothing to invoke"); return }
            do {
                try await trigger.handler.handle(S3Event(records: matching),
                                                 context: context(timeout: trigger.delivery.timeoutSeconds) { trigger.matches(eventName: $0, key: $2) })
                print(String(format: "%@ succeeded in %.0f ms with %d record(s)", name, Date().timeIntervalSince(started) * 1000, matching.count))
            } catch {
                print(TerminalText.visible("\(name) failed: \(error)"))
                failed = true
            }
        } else if let trigger = registry.streamTriggers.first(where: { $0.name == name }) {
            let decoded: DynamoDBEvent
            do { decoded = try JSONDecoder().decode(DynamoDBEvent.self, from: data) } catch {
                throw ValidationError("\(event) is not a DynamoDB stream event: \(DecodingProblem.describe(error))")
            }
            var matching = decoded.records.filter(trigger.matches)
            let skipped = decoded.records.count - matching.count
            if skipped > 0 { print("\(skipped) record(s) are from another table or do not match \(name)'s filters and are skipped") }
            guard !matching.isEmpty else { print("nothing to invoke"); return }
            for i in matching.indices { matching[i].dynamodb = matching[i].dynamodb.projected(to: trigger.viewType) }
            do {
                let response = try await trigger.handler.handle(DynamoDBEvent(records: matching),
                                                                context: context(timeout: trigger.mapping.timeoutSeconds) { _, _, _ in false })
                print(TerminalText.visibleJSON(String(decoding: try FerryJSON.encodeSorted(response), as: UTF8.self)))
                if response.batchItemFailures.isEmpty {
                    print(String(format: "%@ succeeded in %.0f ms with %d record(s)", name, Date().timeIntervalSince(started) * 1000, matching.count))
                } else {
                    print("\(name) reported \(response.batchItemFailures.count) failed record(s)")
                    failed = true
                }
            } catch {
                print(TerminalText.visible("\(name) failed: \(error)"))
                failed = true
            }
        } else {
            throw ValidationError("no handler named '\(name)'; registered: \(registry.names.joined(separator: ", "))")
        }
        for request in recorded.requests {
            print(TerminalText.visible("would enqueue: \(request.op.rawValue) s3://\(request.bucket)/\(request.key) (id \(request.id); not sent by triggers test)"))
        }
        for message in sent.messages {
            let key = message.key.map { " key \(String(decoding: $0, as: UTF8.self))" } ?? ""
            print(TerminalText.visible("would send to \(message.topic)\(key): \(message.value.count) bytes (not sent by triggers test)"))
        }
        if failed { throw ExitCode.failure }
    }
}

/// What a handler sent to Kafka topics during `ferry triggers test` (the Kafka
/// forward target, or a handler's own `context.messages`): kept and printed,
/// never sent, as the transfers it enqueues are.
final class RecordedMessages: MessageSender {
    struct Message: Sendable { var topic: String; var key: [UInt8]?; var value: [UInt8] }
    private let kept = Mutex<[Message]>([])
    var messages: [Message] { kept.withLock { $0 } }
    func send(topic: String, key: [UInt8]?, value: [UInt8]) async throws {
        kept.withLock { $0.append(Message(topic: topic, key: key, value: value)) }
    }
}
