import ArgumentParser
import FerryCore
import FerryWorker
import Foundation

/// The value of `key` from the environment or the configuration file; a flag
/// the user set is checked first, by the caller (flags win).
func setting(_ key: SettingKey) -> String? {
    currentSources().value(key)?.0
}

private func currentSources() -> ConfigurationSources {
    if let installed = ProcessSettings.sources { return installed }
    // No --config: the environment alone (reading no file cannot fail).
    return try! ConfigurationSources()
}

/// `--config FILE` (env FERRY_CONFIG): the configuration file below environment and flags.
struct ConfigFileOption: ParsableArguments {
    @Option(name: .customLong("config"), help: "YAML or JSON configuration file (env FERRY_CONFIG); environment variables and flags override it.")
    var path: String?

    /// Loads the file (if any) and installs it for this process.
    func install() throws {
        let path = self.path ?? environment("FERRY_CONFIG")
        do {
            ProcessSettings.install(try ConfigurationSources(filePath: path))
        } catch {
            throw ValidationError(error.description)
        }
    }
}

/// Fills options the user did not set from the environment or the file, and
/// records where each value came from.
enum Resolve {
    static func string(_ field: inout String?, _ key: SettingKey) {
        if let value = field {
            ProcessSettings.record(key, value, .flag)
        } else if let (value, source) = currentSources().value(key) {
            field = value
            ProcessSettings.record(key, value, source)
        }
    }

    static func number<T: LosslessStringConvertible>(_ field: inout T?, _ key: SettingKey) throws {
        if let value = field {
            ProcessSettings.record(key, "\(value)", .flag)
        } else if let (text, source) = currentSources().value(key) {
            guard let value = T(text) else {
                throw ValidationError("\(key.rawValue) (\(source == .file ? "configuration file" : key.environment[0])) must be a number, got '\(text)'")
            }
            field = value
            ProcessSettings.record(key, text, source)
        }
    }

    static func list(_ field: inout [String], _ key: SettingKey) {
        if !field.isEmpty {
            ProcessSettings.record(key, field.joined(separator: ","), .flag)
        } else if let (items, source) = key.kind == .map ? currentSources().pairs(key) : currentSources().list(key) {
            field = items
            ProcessSettings.record(key, items.joined(separator: ","), source)
        }
    }

    static func flag(_ field: inout Bool, _ key: SettingKey) throws {
        if field {
            ProcessSettings.record(key, "true", .flag)
            return
        }
        do {
            if let (value, source) = try currentSources().flag(key) {
                field = value
                ProcessSettings.record(key, value ? "true" : "false", source)
            }
        } catch {
            throw ValidationError(error.description)
        }
    }
}
