import Foundation

/// One `ferry worker` command line, built the same way by every test: the
/// settings each test must choose (brokers, storage, data root, state
/// directory), the ones it may (`workerId`, `roles`, `triggerOutput`,
/// `logLevel`), then `extra` for everything else, as the test writes it.
public struct WorkerCommandLine: Sendable {
    public enum Storage: Sendable {
        /// An S3 endpoint (credentials come from the environment); a nil
        /// region leaves it to the worker's own lookup (AWS_REGION, the profile).
        case s3(endpoint: String, region: String? = "us-east-1")
        /// The local directory store.
        case local(URL)
    }

    public var bootstrapServers: String
    public var storage: Storage
    public var dataRoot: URL
    public var stateDirectory: URL
    public var workerId: String?
    /// `--role`, e.g. `transfers` or `transfers,triggers`; nil: every role.
    public var roles: String?
    public var triggerOutput: URL?
    public var logLevel: String?
    public var extra: [String]

    public init(bootstrapServers: String, storage: Storage, dataRoot: URL, stateDirectory: URL, workerId: String? = nil,
                roles: String? = nil, triggerOutput: URL? = nil, logLevel: String? = nil, extra: [String] = []) {
        self.bootstrapServers = bootstrapServers; self.storage = storage; self.dataRoot = dataRoot
        self.stateDirectory = stateDirectory; self.workerId = workerId; self.roles = roles
        self.triggerOutput = triggerOutput; self.logLevel = logLevel; self.extra = extra
    }

    /// The arguments after the `ferry` executable.
    public var arguments: [String] {
        var arguments = ["worker", "--bootstrap-servers", bootstrapServers]
        switch storage {
        case .s3(let endpoint, let region): arguments += ["--s3-endpoint", endpoint] + (region.map { ["--region", $0] } ?? [])
        case .local(let directory): arguments += ["--local-store", directory.path]
        }
        arguments += ["--data-root", dataRoot.path, "--state-dir", stateDirectory.path]
        if let workerId { arguments += ["--worker-id", workerId] }
        if let roles { arguments += ["--role", roles] }
        if let triggerOutput { arguments += ["--trigger-output-dir", triggerOutput.path] }
        if let logLevel { arguments += ["--log-level", logLevel] }
        return arguments + extra
    }

    /// Starts the worker as `name`, its output in `<logDirectory>/<name>.log`.
    public func start(name: String, environment: [String: String] = [:], logDirectory: URL) throws -> BackgroundProcess {
        try BackgroundProcess(name: name, executable: TestPaths.ferryBinary, arguments: arguments, environment: environment,
                              logDirectory: logDirectory)
    }
}
