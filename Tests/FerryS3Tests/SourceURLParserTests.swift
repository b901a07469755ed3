import FerryCore
@testable import FerryLocalStore
@testable import FerryS3
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// The source policy reads a URL with Foundation; curl connects to the host
/// it reads itself. Generated URLs: whatever the policy lets through, curl
/// reads as the same host (an allow-list could otherwise pass one host while
/// curl fetches from another). Before the policy asked curl too, full-width
/// dots (U+3002, U+FF0E) were read apart.
@Suite struct SourceURLParserTests {
    @Test func whatThePolicyPassesCurlReadsAlike() {
        var policy = RemoteSourcePolicy()
        policy.allowedHosts = ["allowed.example", ".trusted.example"]
        let pieces = ["https://", "http://", "https:/", "https:", "allowed.example", "evil.example", "x.trusted.example", "@", ":", ":443",
                      "#", "?", "/", "\\", "%40", "%2f", "%00", "%2e", ".", ";", " ", "\t", "[", "]", "::1", "%25", "user", "。", "\u{ff0e}"]
        var rng = HostileInput.rng(seed: 0x5EC0)
        var passed = 0, disagreements: [String] = []
        for _ in 0..<20_000 {
            let url = "https://" + (0..<Int.random(in: 1...6, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
            guard policy.refusal(of: url, what: "source") == nil, let components = URLComponents(string: url) else { continue }
            passed += 1
            // The host the policy judged is the one curl will connect to.
            if URLHost.readByCurl(url)?.lowercased() != components.host?.lowercased() {
                disagreements.append("\(url.debugDescription): policy saw \(components.host ?? "-"), curl \(URLHost.readByCurl(url) ?? "nothing")")
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements.prefix(10))")
        #expect(passed > 100, "\(passed) passed the policy")
        print("SourceURLParserTests: \(passed) of 20,000 generated URLs passed the policy, all read alike by curl")
    }
}
