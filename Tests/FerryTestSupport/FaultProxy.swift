import Foundation

/// The fault-injecting proxy of Tests/python/fault_proxy.py, in front of `upstream`.
public struct FaultProxy: Sendable {
    public let process: BackgroundProcess
    public let endpoint: String
    public let faults: URL

    /// With `logRequests`, every forwarded request is also written to the
    /// faults file as `METHOD path status`, so tests can count what was sent.
    /// `port` (by default one the proxy picks) lets a test start it again where clients expect it.
    /// The first `corruptGets` GET bodies get a byte flipped; with `laterRangesOnly`,
    /// only those of a range that does not start at byte 0.
    public static func start(upstream: String, rate: Double, corruptGets: Int = 0, laterRangesOnly: Bool = false,
                             logRequests: Bool = false, name: String = "proxy", port: Int? = nil, in root: URL) async throws -> FaultProxy {
        let faults = root.appendingPathComponent("\(name)-faults.txt")
        let process = try BackgroundProcess(name: name, executable: "python3",
                                            arguments: [TestPaths.python.appendingPathComponent("fault_proxy.py").path,
                                                        "\(port ?? 0)", upstream, "\(rate)", faults.path,
                                                        "\(corruptGets)" + (laterRangesOnly ? ":later" : ""),
                                                        logRequests ? "log" : "nolog"],
                                            logDirectory: root)
        let endpoint = "http://127.0.0.1:\(try await process.announcedPort(after: "listening on 127.0.0.1:"))"
        return FaultProxy(process: process, endpoint: endpoint, faults: faults)
    }

    /// One line per injected fault (`503`, `reset` or `corrupt`) or logged request.
    public var injected: [Substring] { (try? String(contentsOf: faults, encoding: .utf8))?.split(separator: "\n") ?? [] }

    /// Successful UploadPart requests forwarded so far (needs `logRequests`).
    public var uploadedParts: Int {
        injected.filter { $0.hasPrefix("PUT ") && $0.contains("partNumber=") && $0.hasSuffix(" 200") }.count
    }
}
