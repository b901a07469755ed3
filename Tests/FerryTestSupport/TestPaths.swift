import Foundation
import Synchronization

/// Where the repository, the built `ferry` binary and the Python helpers are.
public enum TestPaths {
    public static let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    public static let python = repositoryRoot.appendingPathComponent("Tests/python")

    /// The `ferry` executable built next to the test bundle (or `FERRY_BIN`).
    public static var ferryBinary: String {
        if let explicit = ProcessInfo.processInfo.environment["FERRY_BIN"] { return explicit }
        let bundleDir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for dir in [bundleDir, bundleDir.deletingLastPathComponent()] {
            let candidate = dir.appendingPathComponent("ferry").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return repositoryRoot.appendingPathComponent(".build/debug/ferry").path
    }

    /// A new empty directory under the system temp dir.
    public static func temporaryDirectory(_ label: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("ferry-test-\(label)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        // Resolve /tmp symlinks so paths compare equal to what the worker resolves.
        return URL(fileURLWithPath: realpath(url.path, nil).map { p in defer { free(p) }; return String(cString: p) } ?? url.path)
    }

    /// A TCP port on 127.0.0.1 that was free a moment ago, for a server a
    /// test starts. Taken below the kernel's ephemeral range (32768–60999 on
    /// Debian): a port from that range can be taken by any outgoing
    /// connection between this check and the server's bind (a full run saw
    /// radosgw fail with "Address already in use" that way). Never the same
    /// port twice in one test process.
    public static func freePort() -> Int {
        for _ in 0..<200 {
            let port = Int.random(in: 20_000..<32_000)
            guard handedOut.withLock({ $0.insert(port).inserted }) else { continue }
            if canBind(port) { return port }
        }
        return kernelChosenPort()  // the low range is crowded: fall back to an ephemeral port
    }

    private static func kernelChosenPort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) { ptr in
            ptr.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                _ = bind(fd, sa, length)
                _ = getsockname(fd, sa, &length)
            }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static let handedOut = Mutex<Set<Int>>([])

    /// Whether something on 127.0.0.1 takes a TCP connection on `port` now.
    public static func acceptsConnections(port: Int) -> Bool {
        onLoopbackSocket(port: port) { connect($0, $1, $2) == 0 }
    }

    /// Sets `path`'s access and modification times to `seconds` ago (a file left
    /// behind that long, for code that acts on a file's age).
    public static func age(_ path: String, seconds: Double) {
        let then = Int(Date().timeIntervalSince1970 - seconds)
        var times = [timeval(tv_sec: then, tv_usec: 0), timeval(tv_sec: then, tv_usec: 0)]
        _ = utimes(path, &times)
    }

    private static func canBind(_ port: Int) -> Bool {
        onLoopbackSocket(port: port) { bind($0, $1, $2) == 0 }
    }

    /// Calls `body` with a new TCP socket and 127.0.0.1:`port`; closes the socket after.
    private static func onLoopbackSocket(port: Int, _ body: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Bool) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) { ptr in
            ptr.withMemoryRebound(to: sockaddr.self, capacity: 1) { body(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
}
