import FerryCore
import FerryTestSupport
import FerryWorker
import Foundation
import Testing

/// The checks `ferry config check` and `ferry worker` share before anything
/// starts: the HTTP listen address and the directories the worker writes in.
@Suite struct StartupChecksTests {
    @Test(arguments: [
        ("127.0.0.1:9090", "127.0.0.1", 9090), (":9090", "", 9090), ("0.0.0.0:0", "0.0.0.0", 0),
        ("[::1]:80", "::1", 80), ("localhost:65535", "localhost", 65535), ("ferry_worker-1.svc:9090", "ferry_worker-1.svc", 9090),
    ])
    func addressesThatBind(text: String, host: String, port: Int) throws {
        let address = try ListenAddress(parsing: text)
        #expect(address.host == host && address.port == port)
    }

    @Test(arguments: ["nonsense", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:+80", "127.0.0.1:٣", "999.1.1.1:80",
                      "1.2.3:80", "::1:80", "[::g]:80", "[]:80", "a..b:80", "-a:80", "a b:80", "ä:80", "\(String(repeating: "a", count: 64)):80"])
    func addressesRefusedWithTheReason(text: String) {
        #expect(throws: ConfigurationError.self) { try ListenAddress(parsing: text) }
    }

    /// Invariant on generated text: every string parses or is refused with a
    /// reason that quotes at most 200 bytes of it; never a trap. An accepted
    /// address has a port 0…65535 and a host without a colon unless IPv6.
    @Test func generatedAddressesParseOrAreRefused() {
        var rng = HostileInput.rng(seed: 20261128)
        let pieces = ["127.0.0.1", "::1", "[::1]", "[", "]", ":", "::", "0", "65535", "65536", "99999999999999999999", "-", ".", "a", "_",
                      "\u{0}", "\n", "٣", "é", "localhost", String(repeating: "9", count: 300)]
        for _ in 0..<5000 {
            let text = (0..<Int.random(in: 0...6, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
            do {
                let address = try ListenAddress(parsing: text)
                #expect((0...65535).contains(address.port), "\(text.debugDescription)")
                #expect(!address.host.contains(":") || text.hasPrefix("["), "\(text.debugDescription)")
            } catch {
                #expect(error.description.utf8.count < 700, "\(text.debugDescription): \(error.description)")
            }
        }
    }

    @Test func directoriesTheWorkerCanOrCannotWriteIn() throws {
        let base = try TestPaths.temporaryDirectory("startup-checks")
        defer { try? FileManager.default.removeItem(at: base) }
        let file = base.appendingPathComponent("a-file")
        try Data("x".utf8).write(to: file)
        #expect(WritableDirectory.problem(base.path, option: "--state-dir") == nil)
        #expect(WritableDirectory.problem(base.appendingPathComponent("new/deeper").path, option: "--state-dir") == nil)
        #expect(WritableDirectory.problem(file.path, option: "--state-dir")?.contains("exists and is not a directory") == true)
        #expect(WritableDirectory.problem(file.appendingPathComponent("under").path, option: "--local-store")?.contains("Not a directory") == true)
        #expect(WritableDirectory.problem("", option: "--state-dir") == "--state-dir is empty")
        // Nothing was created by the checks.
        #expect(!FileManager.default.fileExists(atPath: base.appendingPathComponent("new").path))
        // A read-only filesystem refuses root too (where /sys is mounted read-only, as in containers).
        if access("/sys", W_OK) != 0 {
            #expect(WritableDirectory.problem("/sys/ferry-state", option: "--state-dir")?.contains("cannot write in /sys") == true)
        }
    }
}
