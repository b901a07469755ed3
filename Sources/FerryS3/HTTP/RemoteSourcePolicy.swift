import FerryCore
import FerryStorage
import Foundation

/// What `https://` upload sources may reach. The address check runs on the
/// address libcurl actually connects to (after DNS), on every connection and
/// every redirect hop, so neither DNS tricks nor redirects reach internal services.
public struct RemoteSourcePolicy: Sendable, Hashable {
    /// Schemes allowed (default `https` only).
    public var schemes: Set<String> = ["https"]
    /// Hosts allowed; empty allows any. `.example.com` allows its subdomains.
    public var allowedHosts: [String] = []
    /// Ranges let through although loopback, link-local or private (e.g. `127.0.0.0/8` in tests).
    public var allowedRanges: [AddressRange] = []
    public var maxBytes: Int64 = 5 << 30
    public var timeoutSeconds: Int = 600
    public var maxRedirects: Int = 5

    public init() {}

    /// Refuses a URL by scheme or host; nil when it may be fetched. The host
    /// judged is the one libcurl will connect to: the URL is read by Foundation
    /// and by curl's own parser, and one they read apart is refused (else an
    /// allow-list could pass one host while curl fetches from another).
    /// `what` names the URL's role in the messages ("source", "callback").
    public func refusal(of text: String, what: String) -> FerryError? {
        guard let url = URLComponents(string: text) else { return FerryError(.invalidRequest, "\(what) is not a valid URL") }
        if let refusal = refusal(of: url) { return refusal }
        guard let host = url.host, URLHost.isPlain(host, percentEncoded: url.percentEncodedHost) else {
            return FerryError(.forbiddenSource, "\(what) host must be a DNS name (an IDN in its xn-- form) or an IP address")
        }
        guard let curlHost = URLHost.readByCurl(text), URLHost.same(curlHost, host) else {
            return FerryError(.forbiddenSource, "\(what) URL does not read as one host (libcurl reads it otherwise); refused")
        }
        return nil
    }

    /// The scheme and host-list part of `refusal(of:what:)`, on a URL already read.
    func refusal(of url: URLComponents) -> FerryError? {
        guard let scheme = url.scheme?.lowercased(), schemes.contains(scheme) else {
            return FerryError(.forbiddenSource, "scheme '\(url.scheme ?? "")' is not allowed for sources (allowed: \(schemes.sorted().joined(separator: ", ")))")
        }
        guard let host = url.host?.lowercased(), !host.isEmpty else {
            return FerryError(.forbiddenSource, "source URL names no host")
        }
        if !allowedHosts.isEmpty && !allowedHosts.contains(where: { Self.hostMatches(host, $0.lowercased()) }) {
            return FerryError(.forbiddenSource, "host \(host) is not in the source host allow-list")
        }
        return nil
    }

    /// Whether a connection to `address` is allowed.
    public func permits(_ address: [UInt8]) -> Bool {
        !Self.isInternal(address) || allowedRanges.contains { $0.contains(address) }
    }

    static func hostMatches(_ host: String, _ rule: String) -> Bool {
        rule.hasPrefix(".") ? host.hasSuffix(rule) || host == String(rule.dropFirst()) : host == rule
    }

    /// Loopback, private, link-local, carrier-grade NAT, multicast, unspecified and
    /// reserved addresses (IPv4: 4 bytes; IPv6: 16, with IPv4-mapped and NAT64 forms unwrapped).
    public static func isInternal(_ a: [UInt8]) -> Bool {
        if a.count == 16 {
            if a[0..<10].allSatisfy({ $0 == 0 }) && a[10] == 0xFF && a[11] == 0xFF { return isInternal(Array(a[12...])) }
            if a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xFF && a[3] == 0x9B && a[4..<12].allSatisfy({ $0 == 0 }) {
                return isInternal(Array(a[12...]))
            }
            if a[0..<15].allSatisfy({ $0 == 0 }) { return true }             // :: and ::1
            if a[0] == 0xFE && (a[1] & 0xC0) == 0x80 { return true }         // fe80::/10 link-local
            if (a[0] & 0xFE) == 0xFC { return true }                         // fc00::/7 unique local
            if a[0] == 0xFF { return true }                                  // multicast
            return false
        }
        guard a.count == 4 else { return true }
        switch (a[0], a[1]) {
        case (0, _), (10, _), (127, _): return true
        case (100, 64...127): return true                                    // carrier-grade NAT
        case (169, 254): return true                                         // link-local, cloud metadata
        case (172, 16...31): return true
        case (192, 168): return true
        case (192, 0) where a[2] == 0: return true
        case (198, 18...19): return true
        case (224..., _): return true                                        // multicast, reserved, broadcast
        default: return false
        }
    }
}

/// A CIDR range such as `127.0.0.0/8` or `fd00::/8`.
public struct AddressRange: Sendable, Hashable, CustomStringConvertible {
    public let base: [UInt8]
    public let prefixLength: Int

    public init(_ cidr: String) throws(ConfigurationError) {
        let parts = cidr.split(separator: "/", maxSplits: 1)
        guard let address = AddressRange.parse(String(parts[0])) else { throw ConfigurationError("'\(cidr)' is not an address range") }
        let length = parts.count == 2 ? Int(parts[1]) : address.count * 8
        guard let length, (0...(address.count * 8)).contains(length) else { throw ConfigurationError("'\(cidr)' has a bad prefix length") }
        base = address
        prefixLength = length
    }

    public var description: String { "\(base.count == 4 ? base.map(String.init).joined(separator: ".") : "ipv6")/\(prefixLength)" }

    public func contains(_ address: [UInt8]) -> Bool {
        guard address.count == base.count else { return false }
        var bits = prefixLength
        for i in 0..<base.count where bits > 0 {
            let mask: UInt8 = bits >= 8 ? 0xFF : ~(0xFF >> UInt8(bits))
            if address[i] & mask != base[i] & mask { return false }
            bits -= 8
        }
        return true
    }

    /// IPv4 or IPv6 text to bytes.
    public static func parse(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}
