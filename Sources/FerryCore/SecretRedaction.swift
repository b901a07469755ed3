import Foundation

/// Keeps secrets (identity tokens, SSE-C keys) out of what Ferry writes for
/// people and other systems: logs, statuses, DLQ records.
public enum SecretRedaction {
    public static let placeholder = "<redacted>"
    /// Request headers whose values are secrets.
    public static let secretHeaders: Set<String> = ["x-amz-server-side-encryption-customer-key",
                                                    "x-amz-copy-source-server-side-encryption-customer-key"]

    /// The message with the values of `auth` and secret headers replaced by the
    /// placeholder, every other byte unchanged; and the names of the redacted
    /// fields. A message that is not a JSON object is returned as it is.
    public static func redact(_ message: [UInt8]) -> (bytes: [UInt8], fields: [String]) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(message)) as? [String: Any] else { return (message, []) }
        var secrets: [(String, String)] = []
        if let token = object["auth"] as? String, !token.isEmpty { secrets.append(("auth", token)) }
        if let headers = object["headers"] as? [String: Any] {
            for (name, value) in headers where secretHeaders.contains(name.lowercased()) {
                if let value = value as? String, !value.isEmpty { secrets.append(("headers.\(name)", value)) }
            }
        }
        guard !secrets.isEmpty else { return (message, []) }
        var text = String(decoding: message, as: UTF8.self)
        for (_, value) in secrets {
            // The value as JSON writes it (escaped), inside its quotes.
            let encoded = String(decoding: (try? JSONEncoder().encode(value)) ?? Data(), as: UTF8.self)
            text = text.replacingOccurrences(of: encoded, with: "\"\(placeholder)\"")
            let unescaped = "\"\(value)\""
            text = text.replacingOccurrences(of: unescaped, with: "\"\(placeholder)\"")
        }
        return (Array(text.utf8), secrets.map(\.0))
    }

    /// Whether a file holding secrets can be read by its group or others.
    public static func isExposed(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0 else { return false }
        return info.st_mode & 0o077 != 0
    }
}
