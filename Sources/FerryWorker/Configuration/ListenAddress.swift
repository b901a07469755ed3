import FerryCore
import Foundation

/// `--http-address` as `HOST:PORT`, read where the configuration is read, so
/// that `ferry config check` and `ferry worker` refuse the same addresses
/// before anything starts (the worker used to find out after joining Kafka).
/// An empty host is every interface; an IPv6 host goes in brackets.
public struct ListenAddress: Sendable, Equatable {
    public let host: String
    public let port: Int

    /// The host to bind: every IPv4 interface for an empty one.
    public var bindHost: String { host.isEmpty ? "0.0.0.0" : host }

    public init(parsing text: String) throws(ConfigurationError) {
        let shown = TextClip.clipped(text, toUTF8: 200)
        guard let colon = text.lastIndex(of: ":") else {
            throw ConfigurationError("http address '\(shown)' is not HOST:PORT (e.g. 127.0.0.1:9090)")
        }
        let portText = text[text.index(after: colon)...]
        guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
              let port = Int(portText), port <= 65_535 else {
            throw ConfigurationError("http address '\(shown)': the port must be 0…65535")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") && host.count >= 2 {
            host = String(host.dropFirst().dropLast())
            guard Self.parses(host, family: AF_INET6) else {
                throw ConfigurationError("http address '\(shown)': '\(TextClip.clipped(host, toUTF8: 100))' is not an IPv6 address")
            }
        } else if host.contains(":") {
            throw ConfigurationError("http address '\(shown)': an IPv6 host goes in brackets, e.g. [::1]:9090")
        } else if !host.isEmpty, host.allSatisfy({ $0 == "." || ($0.isASCII && $0.isNumber) }) {
            guard Self.parses(host, family: AF_INET) else {
                throw ConfigurationError("http address '\(shown)': '\(TextClip.clipped(host, toUTF8: 100))' is not an IPv4 address")
            }
        } else if !host.isEmpty, let problem = Self.hostNameProblem(host) {
            throw ConfigurationError("http address '\(shown)': \(problem)")
        }
        self.host = host
        self.port = port
    }

    private static func parses(_ text: String, family: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16)
        return inet_pton(family, text, &buffer) == 1
    }

    /// A host name: at most 253 characters, dot-separated labels of 1–63 letters,
    /// digits, hyphens and underscores (container names have them), none
    /// starting or ending with a hyphen.
    private static func hostNameProblem(_ host: String) -> String? {
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        let valid = host.utf8.count <= 253 && labels.allSatisfy { label in
            (1...63).contains(label.count) && label.first != "-" && label.last != "-"
                && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
        }
        return valid ? nil : "'\(TextClip.clipped(host, toUTF8: 100))' is not a host name or address"
    }
}
