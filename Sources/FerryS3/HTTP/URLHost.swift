import FerryStorage
import CCurl
import Foundation

/// The host part of a URL Ferry connects to, held to one plain form so that
/// every parser reads the same host: a DNS name in ASCII (an IDN in its
/// `xn--` form), an IPv4 address, or a bracketed IPv6 address. No percent
/// escapes, no characters a Host header or another parser could read apart.
enum URLHost {
    static func isPlain(_ host: String, percentEncoded: String?) -> Bool {
        let literal = unbracketed(host)
        let allowed = literal.contains(":") ? "0123456789abcdefABCDEF:." : "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_"
        return percentEncoded?.contains("%") != true && !literal.isEmpty && literal.allSatisfy { allowed.contains($0) }
    }

    /// The host libcurl's own URL parser reads from `url` (what it will
    /// connect to), or nil when it refuses the URL.
    static func readByCurl(_ url: String) -> String? {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK else { return nil }
        var host: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_HOST, &host, 0) == CURLUE_OK, let host else { return nil }
        defer { curl_free(host) }
        return String(cString: host)
    }

    static func same(_ a: String, _ b: String) -> Bool {
        unbracketed(a).lowercased() == unbracketed(b).lowercased()
    }

    private static func unbracketed(_ host: String) -> Substring {
        host.hasPrefix("[") && host.hasSuffix("]") ? host.dropFirst().dropLast() : Substring(host)
    }
}
