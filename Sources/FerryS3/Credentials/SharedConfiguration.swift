import FerryStorage
import Foundation

/// AWS's shared files, merged per profile: the config file (`AWS_CONFIG_FILE`,
/// default `~/.aws/config`; sections `[default]` and `[profile NAME]`) and the
/// credentials file (`AWS_SHARED_CREDENTIALS_FILE`, default
/// `~/.aws/credentials`; sections `[NAME]`), which wins for a key in both.
public struct SharedConfiguration: Sendable {
    public var profiles: [String: [String: String]]
    /// The files read, for messages.
    public var files: [String]

    public init(environment: [String: String]) {
        let home = environment["HOME"] ?? NSHomeDirectory()
        let config = environment["AWS_CONFIG_FILE"] ?? "\(home)/.aws/config"
        let credentials = environment["AWS_SHARED_CREDENTIALS_FILE"] ?? "\(home)/.aws/credentials"
        var profiles: [String: [String: String]] = [:]
        if let text = try? String(contentsOfFile: config, encoding: .utf8) {
            for (name, values) in Self.parse(text, configFile: true) { profiles[name, default: [:]].merge(values) { _, new in new } }
        }
        if let text = try? String(contentsOfFile: credentials, encoding: .utf8) {
            for (name, values) in Self.parse(text, configFile: false) { profiles[name, default: [:]].merge(values) { _, new in new } }
        }
        self.profiles = profiles
        self.files = [config, credentials]
    }

    public init(profiles: [String: [String: String]]) {
        self.profiles = profiles
        self.files = []
    }

    /// INI sections → lowercased keys → values. In the config file a profile's
    /// section is `[profile NAME]` (`[default]` stays as it is); other
    /// sections (`[sso-session …]`, `[services …]`) are skipped.
    static func parse(_ text: String, configFile: Bool) -> [String: [String: String]] {
        var result: [String: [String: String]] = [:]
        var section: String?
        for rawLine in text.split(whereSeparator: \.isNewline) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                let name = line.dropFirst().dropLast().trimmingCharacters(in: .whitespaces)
                if !configFile || name == "default" {
                    section = name
                } else if name.hasPrefix("profile ") {
                    section = name.dropFirst("profile ".count).trimmingCharacters(in: .whitespaces)
                } else {
                    section = nil
                }
                continue
            }
            guard let section, let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            result[section, default: [:]][key] = value
        }
        return result
    }
}
