import ArgumentParser

@main
struct Ferry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry",
        abstract: "Kafka-fed transfer workers for S3-compatible storage, with Lambda-style triggers.",
        discussion: """
            Exit codes: 0 success; 1 a transfer ended failed, cancelled or rejected; \
            2 bad usage or configuration; 3 a wait timed out; 4 Kafka or storage unreachable.
            """,
        version: FerryVersion.current,
        subcommands: [DevCommand.self, WorkerCommand.self, EnqueueCommand.self, CopyCommand.self, PresignCommand.self,
                      PauseCommand.self, ResumeCommand.self, CancelCommand.self, VersionCommand.self]
    )
}

enum FerryVersion {
    static let current = "0.1.0"
}

/// Process exit codes documented in `ferry --help` and the README.
enum FerryExit {
    static let transferNotCompleted: Int32 = 1
    static let configuration: Int32 = 2
    static let timedOut: Int32 = 3
    static let unreachable: Int32 = 4
}
