import FerryCore
import FerryS3
import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// An endpoint URL is taken only when every part of it is used: requests go
/// to scheme://host[:port]/, so credentials, a path, a query, a port out of
/// range or a host that is no name or address are refused with the reason,
/// never dropped.
@Suite struct S3EndpointTests {
    @Test func everyGeneratedEndpointIsTakenWholeOrRefused() {
        let schemes = ["http", "https", "HTTPS", "ftp", ""]
        let users = ["", "u@", "u:p@", "%40@"]
        let hosts = ["host", "127.0.0.1", "[::1]", "ex.com.", "a_b", "[fe80::1%25eth0]", "ho%20st", "x%0d%0ay", "", "[::1", "ü.com", "h\u{7}"]
        let ports = ["", ":", ":1", ":7480", ":65535", ":0", ":65536", ":99999999999", ":-1", ":x"]
        let paths = ["", "/", "/p", "//", "/%2F"]
        let tails = ["", "?", "?a=1", "#f"]
        var rng = HostileInput.rng(seed: 0xE4D9)
        var taken = 0
        for _ in 0..<3000 {
            // Each part is usually a good one (they come first), so that what is taken is tried too.
            let good = [3, 1, 5, 5, 2, 1]
            let parts = zip([schemes, users, hosts, ports, paths, tails], good).map { options, count in
                Int.random(in: 0..<4, using: &rng) > 0 ? options[Int.random(in: 0..<count, using: &rng)] : options.randomElement(using: &rng)!
            }
            let url = "\(parts[0])://\(parts[1])\(parts[2])\(parts[3])\(parts[4])\(parts[5])"
            guard let endpoint = try? S3Endpoint(url: url) else { continue }
            taken += 1
            // What is used is all there was: the URL rebuilt from the endpoint names the same place.
            let header = endpoint.hostHeader(bucket: nil)
            #expect(!header.unicodeScalars.contains { $0.properties.generalCategory == .control || $0 == " " }, "\(url) → \(header)")
            let rebuilt = URLComponents(string: "\(endpoint.scheme)://\(header)/")
            let given = URLComponents(string: url)
            #expect(rebuilt?.host == given?.host && parts[1].isEmpty, "\(url) → \(header)")
            #expect((parts[4].isEmpty || parts[4] == "/") && parts[5].isEmpty, "\(url) was taken with a path, query or fragment")
            if let port = given?.port { #expect((1...65535).contains(port), "\(url)") }
        }
        #expect(taken > 300, "\(taken) of 3000 taken")
        print("S3EndpointTests: \(taken) of 3000 generated endpoints taken, the rest refused")
        #expect(throws: ConfigurationError.self) { try S3Endpoint(url: "http://user:secret@127.0.0.1:7480") }
        #expect(throws: ConfigurationError.self) { try S3Endpoint(url: "https://gateway.example.com/storage") }
        #expect((try? S3Endpoint(url: "http://[::1]:7480"))?.hostHeader(bucket: nil) == "[::1]:7480")
    }
}
