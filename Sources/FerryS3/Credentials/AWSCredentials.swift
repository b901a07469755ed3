import FerryCore
import FerryStorage
import Foundation

/// An access key pair, optionally with a session token and an expiry
/// (temporary credentials). `description` never shows the secret.
public struct AWSCredentials: Sendable, Hashable, CustomStringConvertible {
    public var accessKeyId: String
    public var secretAccessKey: String
    public var sessionToken: String?
    /// When temporary credentials stop working; nil for long-term keys.
    public var expiration: Date?
    /// The time of the answer that gave these keys by their source's own
    /// clock (its `Date` header), when it came over HTTP: `expiration` is
    /// on that clock, which need not be this machine's.
    public var sourceTime: Date?

    public init(accessKeyId: String, secretAccessKey: String, sessionToken: String? = nil, expiration: Date? = nil,
                sourceTime: Date? = nil) {
        self.accessKeyId = accessKeyId
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
        self.expiration = expiration
        self.sourceTime = sourceTime
    }

    public var description: String {
        "AWSCredentials(accessKeyId: \(accessKeyId), secretAccessKey: <redacted>\(sessionToken == nil ? "" : ", sessionToken: <redacted>")"
            + "\(expiration.map { ", expiration: \(Timestamp.iso8601($0))" } ?? ""))"
    }

    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`; nil when the pair is incomplete.
    public static func fromEnvironment(_ env: [String: String] = ProcessInfo.processInfo.environment) -> AWSCredentials? {
        guard let id = env["AWS_ACCESS_KEY_ID"], !id.isEmpty,
              let secret = env["AWS_SECRET_ACCESS_KEY"], !secret.isEmpty else { return nil }
        let token = env["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        return AWSCredentials(accessKeyId: id, secretAccessKey: secret, sessionToken: token)
    }

    /// A profile of the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`,
    /// default `~/.aws/credentials`); `profile` defaults to `AWS_PROFILE`, then `default`.
    public static func fromSharedFile(profile: String? = nil,
                                      _ env: [String: String] = ProcessInfo.processInfo.environment) -> AWSCredentials? {
        let home = env["HOME"] ?? NSHomeDirectory()
        let path = env["AWS_SHARED_CREDENTIALS_FILE"] ?? "\(home)/.aws/credentials"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        let wanted = profile ?? env["AWS_PROFILE"] ?? "default"
        var section: String?
        var values: [String: String] = [:]
        for rawLine in text.split(whereSeparator: \.isNewline) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast()).trimmingCharacters(in: .whitespaces)
                continue
            }
            guard section == wanted, let eq = line.firstIndex(of: "=") else { continue }
            values[line[..<eq].trimmingCharacters(in: .whitespaces).lowercased()] =
                line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
        }
        guard let id = values["aws_access_key_id"], let secret = values["aws_secret_access_key"] else { return nil }
        return AWSCredentials(accessKeyId: id, secretAccessKey: secret, sessionToken: values["aws_session_token"])
    }
}
