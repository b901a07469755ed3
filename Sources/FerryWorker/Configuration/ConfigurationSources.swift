import FerryCore
import FerryTriggerKit
import FerryTriggers
import Foundation
import Synchronization
import Yams

/// Where a setting's value came from.
public enum SettingSource: String, Sendable, Codable {
    case flag, environment, file, `default`
}

/// The layers below the command line: a configuration file (YAML or JSON, one
/// schema: `SettingKey`) and the environment. From the highest: a flag the
/// user set (at the call site), Ferry's own `FERRY_*` variables, the file,
/// then the AWS SDKs' variables (`AWS_REGION`, `AWS_CA_BUNDLE`, …). Those are
/// often set for other tools in the same shell or image, so they fill in
/// what the file leaves out instead of overriding what it says.
public struct ConfigurationSources: Sendable {
    public enum Value: Sendable, Equatable {
        case scalar(String)
        case list([String])
        case map([String: String])
    }

    public private(set) var file: [SettingKey: Value] = [:]
    /// Triggers declared in the file's `triggers:` list (webhook and kafka targets).
    public private(set) var targets: [TargetDeclaration] = []
    public let filePath: String?
    let environment: [String: String]

    public init(filePath: String? = nil, fileText: String? = nil,
                environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) {
        self.filePath = filePath
        self.environment = environment
        var text = fileText
        if text == nil, let filePath {
            guard let read = try? String(contentsOfFile: filePath, encoding: .utf8) else {
                throw ConfigurationError("cannot read configuration file \(filePath)")
            }
            text = read
        }
        if let text {
            try Self.refuseByteOrderMarks(text, name: filePath ?? "configuration")
            file = try Self.parse(text, name: filePath ?? "configuration")
            targets = try Self.targets(text, name: filePath ?? "configuration")
        }
    }

    /// A scalar setting from the environment or the file, with its source.
    public func value(_ key: SettingKey) -> (String, SettingSource)? {
        if let own = variable(key, ownOnly: true) { return (own, .environment) }
        if case .scalar(let v) = file[key] { return (v, .file) }
        return variable(key, ownOnly: false).map { ($0, .environment) }
    }

    /// The first set variable of `key`: of Ferry's own (`FERRY_*`), or of the others (the AWS SDKs').
    func variable(_ key: SettingKey, ownOnly: Bool) -> String? {
        for name in key.environment where name.hasPrefix("FERRY_") == ownOnly {
            if let v = environment[name], !v.isEmpty { return v }
        }
        return nil
    }

    /// A list setting (`FERRY_…` variables hold comma-separated items).
    public func list(_ key: SettingKey) -> ([String], SettingSource)? {
        func items(_ text: String) -> [String] { text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
        if let own = variable(key, ownOnly: true) { return (items(own), .environment) }
        if case .list(let listed) = file[key] { return (listed, .file) }
        return variable(key, ownOnly: false).map { (items($0), .environment) }
    }

    /// A map setting as `NAME=VALUE` items (`FERRY_KAFKA_PROPERTIES=a=1,b=2`).
    public func pairs(_ key: SettingKey) -> ([String], SettingSource)? {
        if let (items, source) = list(key), source == .environment { return (items, source) }
        if case .map(let map) = file[key] { return (map.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }, .file) }
        return nil
    }

    /// A switch: true, false, 1, 0, yes, no.
    public func flag(_ key: SettingKey) throws(ConfigurationError) -> (Bool, SettingSource)? {
        guard let (text, source) = value(key) else { return nil }
        switch text.lowercased() {
        case "true", "1", "yes", "on": return (true, source)
        case "false", "0", "no", "off": return (false, source)
        default: throw ConfigurationError("\(key.rawValue) must be true or false, got '\(text)'")
        }
    }

    /// Parses YAML (JSON is YAML too) into settings; an unknown key, or a value
    /// of the wrong shape, is an error naming its path.
    /// The `triggers:` list: each entry a `TargetDeclaration` (unknown fields are errors).
    static func targets(_ text: String, name: String) throws(ConfigurationError) -> [TargetDeclaration] {
        guard let top = (try? Yams.load(yaml: text)) as? [String: Any], let list = top["triggers"] else { return [] }
        guard let entries = list as? [[String: Any]] else { throw ConfigurationError("\(name): 'triggers' must be a list of mappings") }
        let fields = Set(["name", "type", "url", "headers", "topic", "events", "prefix", "suffix", "table", "viewType", "batchSize",
                          "maximumBatchingWindowSeconds", "maximumRecordAgeSeconds", "bisectBatchOnFunctionError",
                          "onFailureDestination", "filters", "maximumRetryAttempts", "maximumEventAgeSeconds", "timeoutSeconds",
                          "maximumConcurrency", "startingPosition", "retryDelaySeconds"])
        var result: [TargetDeclaration] = []
        for (index, entry) in entries.enumerated() {
            if let unknown = entry.keys.sorted().first(where: { !fields.contains($0) }) {
                throw ConfigurationError("\(name): unknown key 'triggers[\(index)].\(unknown)' (known: \(fields.sorted().joined(separator: ", ")))")
            }
            var normalised = entry
            // Filter patterns may be written as YAML mappings; Lambda's form is a JSON string.
            // (JSONSerialization traps, not throws, on what JSON cannot hold: checked first.)
            if let filters = entry["filters"] as? [Any] {
                var patterns: [String] = []
                for (position, item) in filters.enumerated() {
                    if let text = item as? String { patterns.append(text); continue }
                    guard item is [String: Any], JSONSerialization.isValidJSONObject(item),
                          let data = try? JSONSerialization.data(withJSONObject: item, options: [.sortedKeys]) else {
                        throw ConfigurationError("\(name): triggers[\(index)].filters[\(position)] must be a filter pattern (a mapping, or its JSON text)")
                    }
                    patterns.append(String(decoding: data, as: UTF8.self))
                }
                normalised["filters"] = patterns
            }
            guard JSONSerialization.isValidJSONObject(normalised) else {
                throw ConfigurationError("\(name): triggers[\(index)] holds a value JSON cannot (such as .nan, .inf or a timestamp)")
            }
            do {
                let data = try JSONSerialization.data(withJSONObject: normalised)
                result.append(try JSONDecoder().decode(TargetDeclaration.self, from: data))
            } catch {
                throw ConfigurationError("\(name): triggers[\(index)]: \(DecodingProblem.describe(error))")
            }
        }
        return result
    }

    /// Yams decodes each scalar with Foundation, which drops a U+FEFF where a
    /// value or key starts: `"\u{FEFF}us-east-1"` would run as `us-east-1`, a
    /// value the file does not hold (the same value from the environment is
    /// refused). The mark is invisible and belongs in no setting, so a file
    /// holding one after its first character, raw or escaped, is refused.
    static func refuseByteOrderMarks(_ text: String, name: String) throws(ConfigurationError) {
        let body = text.unicodeScalars.first == "\u{FEFF}" ? Substring(text.unicodeScalars.dropFirst()) : Substring(text)
        for (number, line) in body.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let lowered = line.lowercased()
            guard line.unicodeScalars.contains("\u{FEFF}") || lowered.contains("\\ufeff") || lowered.contains("\\u0000feff") else { continue }
            let shown = TextClip.clipped(line.replacingOccurrences(of: "\u{FEFF}", with: "<U+FEFF>"), toUTF8: 240)
            throw ConfigurationError("\(name): line \(number + 1) holds U+FEFF (an invisible byte order mark), raw or escaped; "
                + "it belongs in no setting, and the YAML reader would drop it where a value starts: remove it. The line: \(shown)")
        }
    }

    static func parse(_ text: String, name: String) throws(ConfigurationError) -> [SettingKey: Value] {
        let root: Any?
        do {
            root = try Yams.load(yaml: text)
        } catch {
            throw ConfigurationError("\(name) is not valid YAML or JSON: \(error)")
        }
        guard let root else { return [:] }
        guard let top = root as? [String: Any] else { throw ConfigurationError("\(name): the top level must be a mapping of sections") }
        var result: [SettingKey: Value] = [:]
        let known = Set(SettingKey.allCases.map { String($0.rawValue.split(separator: ".")[0]) })
        for (section, body) in top.sorted(by: { $0.key < $1.key }) where section != "triggers" {
            guard known.contains(section) else {
                throw ConfigurationError("\(name): unknown key '\(section)' (sections: \(known.sorted().joined(separator: ", ")))")
            }
            guard let fields = body as? [String: Any] else { throw ConfigurationError("\(name): '\(section)' must be a mapping") }
            for (field, raw) in fields.sorted(by: { $0.key < $1.key }) {
                let path = "\(section).\(field)"
                guard let key = SettingKey(rawValue: path) else {
                    let options = SettingKey.allCases.filter { $0.rawValue.hasPrefix(section + ".") }.map(\.rawValue)
                    throw ConfigurationError("\(name): unknown key '\(path)' (known in \(section): \(options.joined(separator: ", ")))")
                }
                result[key] = try value(raw, for: key, in: name)
            }
        }
        return result
    }

    private static func value(_ raw: Any, for key: SettingKey, in name: String) throws(ConfigurationError) -> Value {
        func scalar(_ any: Any) -> String? {
            switch any {
            case let s as String: return s
            case let b as Bool: return b ? "true" : "false"
            case let i as Int: return String(i)
            case let d as Double: return String(d)
            default: return nil
            }
        }
        switch key.kind {
        case .scalar, .flag:
            guard let s = scalar(raw) else { throw ConfigurationError("\(name): '\(key.rawValue)' must be a single value") }
            return .scalar(s)
        case .list:
            if let s = scalar(raw) { return .list([s]) }
            guard let items = raw as? [Any], case let strings = items.compactMap(scalar), strings.count == items.count else {
                throw ConfigurationError("\(name): '\(key.rawValue)' must be a list of values")
            }
            return .list(strings)
        case .map:
            guard let map = raw as? [String: Any] else {
                throw ConfigurationError("\(name): '\(key.rawValue)' must be a mapping of NAME: VALUE")
            }
            var result: [String: String] = [:]
            for (k, v) in map {
                // A list value (permissions: `guest: [read, write]`) is its items joined by '+'.
                if let items = v as? [Any], case let strings = items.compactMap(scalar), strings.count == items.count {
                    result[k] = strings.joined(separator: "+")
                    continue
                }
                guard let s = scalar(v) else { throw ConfigurationError("\(name): '\(key.rawValue).\(k)' must be a single value") }
                result[k] = s
            }
            return .map(result)
        }
    }
}

/// The sources of this process and what each setting resolved to (for `ferry config check`).
public enum ProcessSettings {
    private static let state = Mutex<(sources: ConfigurationSources?, resolved: [SettingKey: (String, SettingSource)])>((nil, [:]))

    public static func install(_ sources: ConfigurationSources) {
        state.withLock { $0 = (sources, [:]) }
    }

    public static var sources: ConfigurationSources? { state.withLock { $0.sources } }

    public static func record(_ key: SettingKey, _ value: String, _ source: SettingSource) {
        state.withLock { $0.resolved[key] = (value, source) }
    }

    public static var resolved: [SettingKey: (String, SettingSource)] { state.withLock { $0.resolved } }
}
