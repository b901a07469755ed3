import FerryTriggerKit
import ArgumentParser
import FerryCore
import FerryWorker
import Foundation

struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Inspect the worker's configuration.",
        subcommands: [ConfigCheckCommand.self])
}

struct ConfigCheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Validate a worker configuration and print the effective settings (secrets redacted).",
        discussion: """
            Takes everything `ferry worker` takes: a --config file, FERRY_* variables and flags,
            in that order of precedence. Exits 0 when the worker could start with it, 64 with
            the reason otherwise (an unknown key in the file is named with its path).

            Examples:
              ferry config check --config /etc/ferry/worker.yaml
              FERRY_MAX_TRANSFERS=16 ferry config check --config worker.yaml --part-size 16MiB
              ferry config check --config worker.yaml --format json
            """)

    @OptionGroup var options: WorkerOptions

    @Option(help: "table (default) or json.")
    var format = "table"

    func run() async throws {
        var options = self.options
        try options.load()
        // Everything `ferry worker` refuses before it connects is refused here too.
        _ = try options.log.validated()
        let configuration = try configured(options.makeConfiguration)
        // Triggers declared in the file are checked as `ferry worker` would register them.
        let registry = try TriggerSetup.registry(environment: FerryRuntime.triggerEnvironment(configuration), transport: configuration.http)
        // Which provider supplies the S3 credentials, and that it does (never the secret).
        var credentials: String?
        if case .s3(let s3) = configuration.storage {
            do {
                let keys = try await s3.credentials.credentials()
                credentials = "\(s3.credentials.source), access key \(keys.accessKeyId)"
                    + (keys.expiration.map { ", temporary until \(Timestamp.iso8601($0))" } ?? "")
            } catch {
                throw ValidationError("cannot obtain S3 credentials from \(s3.credentials.source): \(error.message)")
            }
        }
        let declared = ProcessSettings.sources?.targets.map(\.name) ?? []
        let resolved = ProcessSettings.resolved
        let rows = SettingKey.allCases.map { key -> (String, String, String) in
            guard let (value, source) = resolved[key] else { return (key.rawValue, "", SettingSource.default.rawValue) }
            return (key.rawValue, key.isSecret ? "<redacted>" : value, source.rawValue)
        }
        switch format {
        case "json":
            var object: [String: [String: String]] = [:]
            for (key, value, source) in rows where source != SettingSource.default.rawValue {
                object[key] = ["value": value, "source": source]
            }
            if let credentials { object["s3.credentials"] = ["value": credentials, "source": "credential chain"] }
            print(String(decoding: try FerryJSON.encodeSorted(object, pretty: true), as: UTF8.self))
        case "table":
            let width = rows.map(\.0.count).max() ?? 0
            if let path = ProcessSettings.sources?.filePath { print("configuration file: \(path)") }
            for (key, value, source) in rows {
                let padded = key.padding(toLength: width, withPad: " ", startingAt: 0)
                print("\(padded)  \(source == "default" ? "(default)" : value)  [\(source)]")
            }
            if let credentials { print("S3 credentials: \(credentials)") }
            print("access: guests \(configuration.permissions.summary(of: .guest)); authenticated \(configuration.permissions.summary(of: .authenticated))")
            if !declared.isEmpty { print("declared triggers: \(declared.joined(separator: ", ")) (see ferry triggers list)") }
            if !registry.yielded.isEmpty { print("not registered: \(registry.yielded.map { "\($0.name) (\($0.reason))" }.joined(separator: "; "))") }
            print("configuration is valid")
        default:
            throw ValidationError("--format must be table or json")
        }
    }
}
