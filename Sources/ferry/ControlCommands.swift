import ArgumentParser
import FerryCore
import FerryKafka
import Foundation
import Logging

/// `ferry pause|resume|cancel ID`: one message on `<prefix>.control`, which
/// every worker reads; the one running the transfer applies it.
struct ControlCommand {
    static func send(_ action: ControlMessage.Action, id: String, kafka: KafkaOptions, log: LogOptions) async throws {
        if let problem = RequestDecoder.idProblem(id) { throw ValidationError(problem.message) }
        let logger = try log.bootstrap(label: "ferry.control")
        let producer = try KafkaProducer(configuration: try kafka.commandConfiguration(), logger: logger)
        let value = try FerryJSON.encode(ControlMessage(id: id, action: action))
        try await producer.send(topic: kafka.topics.control, key: id, value: value)
        print("\(action.rawValue) sent for \(id) (follow it with: ferry status \(ShellWord.quoted(id)) or ferry watch)")
    }
}

struct PauseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "pause", abstract: "Pause a transfer, running or not yet started: no byte moves until it is resumed (remembered across restarts and rebalances).",
                                                    discussion: "Example:\n  ferry pause job-42 --bootstrap-servers kafka:9092")
    @Argument(help: "Transfer id.") var id: String
    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var log: LogOptions
    func run() async throws { try await ControlCommand.send(.pause, id: id, kafka: kafka, log: log) }
}

struct ResumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "resume", abstract: "Resume a paused transfer without re-sending completed parts.",
                                                    discussion: "Example:\n  ferry resume job-42 --bootstrap-servers kafka:9092")
    @Argument(help: "Transfer id.") var id: String
    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var log: LogOptions
    func run() async throws { try await ControlCommand.send(.resume, id: id, kafka: kafka, log: log) }
}

struct CancelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "cancel", abstract: "Cancel a transfer, running, queued or not yet consumed: abort its multipart upload, remove partial files.",
                                                    discussion: "Example:\n  ferry cancel job-42 --bootstrap-servers kafka:9092")
    @Argument(help: "Transfer id.") var id: String
    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var log: LogOptions
    func run() async throws { try await ControlCommand.send(.cancel, id: id, kafka: kafka, log: log) }
}
