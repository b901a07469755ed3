import Foundation
import FerryCore
import FerryStorage

/// Where S3 requests go and how a bucket is addressed.
public struct S3Endpoint: Sendable, Hashable {
    public enum AddressingStyle: String, Sendable, Hashable { case path, virtualHosted = "virtual" }

    /// e.g. `http://127.0.0.1:7480`, `https://s3.eu-west-1.amazonaws.com`.
    public var scheme: String
    public var host: String
    public var port: Int?
    public var style: AddressingStyle

    public init(url: String, style: AddressingStyle = .path) throws(ConfigurationError) {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty else {
            throw ConfigurationError("S3 endpoint must be an http(s) URL with a host, got '\(TerminalText.visible(url))'")
        }
        if let problem = Self.problem(components, host: host) {
            throw ConfigurationError("S3 endpoint '\(TerminalText.visible(url))' \(problem)")
        }
        self.scheme = scheme
        self.host = host
        self.port = components.port
        self.style = style
    }

    /// What in an endpoint URL Ferry would otherwise drop or misuse without a
    /// word: every request goes to scheme://host[:port]/ and nothing else.
    private static func problem(_ url: URLComponents, host: String) -> String? {
        if url.user != nil || url.password != nil {
            return "carries credentials (user:password@); give them as --access-key-id and --secret-access-key or through the AWS credential chain"
        }
        if let port = url.port, !(1...65535).contains(port) { return "has port \(port); ports are 1…65535" }
        if !(url.path.isEmpty || url.path == "/") {
            return "has a path (\(TerminalText.visible(url.path))); buckets are addressed from the endpoint's root, so it would be ignored"
        }
        if url.percentEncodedQuery != nil || url.percentEncodedFragment != nil {
            return "has a query or fragment, which would be ignored"
        }
        // Nothing that could end the Host header or the URL.
        if !URLHost.isPlain(host, percentEncoded: url.percentEncodedHost) {
            return "has host '\(TerminalText.visible(host))'; a host is a DNS name or an IP address"
        }
        return nil
    }

    /// The AWS endpoint of a region; throws when the region makes no host name
    /// (callers check it with `RegionRule` first, for a clearer message).
    public static func aws(region: String) throws -> S3Endpoint {
        try S3Endpoint(url: "https://s3.\(region).amazonaws.com", style: .virtualHosted)
    }

    /// Whether this is an AWS S3 endpoint (accelerate mode exists only there).
    public var isAWS: Bool { host == "s3.amazonaws.com" || (host.hasPrefix("s3.") && host.hasSuffix(".amazonaws.com")) }

    /// S3 Transfer Acceleration: `https://<bucket>.s3-accelerate.amazonaws.com`; nil for non-AWS endpoints.
    public var accelerated: S3Endpoint? {
        guard isAWS else { return nil }
        // Cannot fail: a fixed, well-formed URL.
        return try! S3Endpoint(url: "https://s3-accelerate.amazonaws.com", style: .virtualHosted)
    }

    /// The `Host` header value (with the port unless it is the scheme's default).
    public func hostHeader(bucket: String?) -> String {
        var h = host
        if style == .virtualHosted, let bucket { h = "\(bucket).\(host)" }
        if let port, !(scheme == "http" && port == 80) && !(scheme == "https" && port == 443) { h += ":\(port)" }
        return h
    }

    /// The raw (unencoded) path of an object or bucket.
    public func path(bucket: String?, key: String?) -> String {
        switch (style, bucket, key) {
        case (.path, let b?, let k?): return "/\(b)/\(k)"
        case (.path, let b?, nil): return "/\(b)"
        case (.virtualHosted, _?, let k?): return "/\(k)"
        default: return "/"
        }
    }
}

