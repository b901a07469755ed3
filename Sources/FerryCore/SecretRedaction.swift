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
    /// fields. Every occurrence counts: a message that names `auth` twice has
    /// two tokens, and readers differ on which they take. A message that is
    /// not a JSON object is returned as it is.
    public static func redact(_ message: [UInt8]) -> (bytes: [UInt8], fields: [String]) {
        guard let members = StrictJSON.members(of: message) else { return (message, []) }
        var secrets: [(field: String, range: Range<Int>, value: String)] = []
        for member in members {
            if member.name == "auth" {
                if let token = StrictJSON.string(in: message, at: member.value), !token.isEmpty {
                    secrets.append(("auth", member.value, token))
                }
            } else if member.name == "headers", let headers = StrictJSON.members(of: message, in: member.value) {
                for header in headers where secretHeaders.contains(header.name.lowercased()) {
                    if let value = StrictJSON.string(in: message, at: header.value), !value.isEmpty {
                        secrets.append(("headers.\(header.name)", header.value, value))
                    }
                }
            }
        }
        guard !secrets.isEmpty else { return (message, []) }
        // Each value where it stands (from the end, so earlier ranges hold)…
        var bytes = message
        let quoted = Array("\"\(placeholder)\"".utf8)
        for secret in secrets.sorted(by: { $0.range.lowerBound > $1.range.lowerBound }) {
            bytes.replaceSubrange(secret.range, with: quoted)
        }
        // …and wherever else the same secret is quoted (copied into another field).
        var text = String(decoding: bytes, as: UTF8.self)
        for secret in secrets {
            // As a JSON string, with its slashes escaped or not (both spell it).
            let encoded = (try? FerryJSON.text(secret.value)) ?? ""
            for form in [encoded, encoded.replacingOccurrences(of: "/", with: "\\/")] where !form.isEmpty {
                text = text.replacingOccurrences(of: form, with: "\"\(placeholder)\"")
            }
            text = text.replacingOccurrences(of: "\"\(secret.value)\"", with: "\"\(placeholder)\"")
        }
        var named = Set<String>()
        return (Array(text.utf8), secrets.map(\.field).filter { named.insert($0).inserted })
    }

    /// Whether a file holding secrets can be read by its group or others.
    public static func isExposed(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0 else { return false }
        return info.st_mode & 0o077 != 0
    }
}
