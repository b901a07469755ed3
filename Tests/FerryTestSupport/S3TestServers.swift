import Foundation

/// An S3 server the tests run against, with the credentials it accepts.
public protocol S3TestServer: Sendable {
    var name: String { get }
    var endpoint: String { get }
    var accessKeyId: String { get }
    var secretAccessKey: String { get }
    func stop() async
}

extension S3TestServer {
    /// Runs `body` with this server, then stops it, whether `body` returns or throws.
    @discardableResult
    public func stopAfter<T>(_ body: (Self) async throws -> T) async throws -> T {
        let value: T
        do { value = try await body(self) } catch { await stop(); throw error }
        await stop()
        return value
    }

    /// Environment variables for clients (ferry, boto3) of this server.
    public var clientEnvironment: [String: String] {
        ["AWS_ACCESS_KEY_ID": accessKeyId, "AWS_SECRET_ACCESS_KEY": secretAccessKey, "AWS_REGION": "us-east-1",
         "AWS_ENDPOINT_URL": endpoint, "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required"]
    }
}

/// moto's S3 server (`python3 -m moto.server`): speaks S3, accepts any signature.
public final class MotoServer: S3TestServer {
    public let name = "moto"
    public let endpoint: String
    public let accessKeyId = "testing"
    public let secretAccessKey = "testing"
    private let process: BackgroundProcess

    private init(endpoint: String, process: BackgroundProcess) { self.endpoint = endpoint; self.process = process }

    public static func start(logDirectory: URL) async throws -> MotoServer {
        // Port 0 without SO_REUSEADDR (werkzeug sets it): never a port a socket still
        // holds, such as a stopped Kafka mock broker's (BrokerDownUpTests).
        let launch = "import sys, werkzeug.serving, moto.server; werkzeug.serving.BaseWSGIServer.allow_reuse_address = False; "
            + "sys.exit(moto.server.main(sys.argv[1:]))"
        let process = try BackgroundProcess(name: "moto", executable: "python3",
                                            arguments: ["-c", launch, "-H", "127.0.0.1", "-p", "0"],
                                            logDirectory: logDirectory)
        let endpoint = "http://127.0.0.1:\(try await process.announcedPort(after: "Running on http://127.0.0.1:"))"
        let up = await eventually(timeout: 30) { await httpAnswers(endpoint) }
        guard up else { throw CommandFailed(description: "moto did not start: \(process.log)") }
        return MotoServer(endpoint: endpoint, process: process)
    }

    public func stop() async { await process.stop() }
}

/// A throw-away Ceph RADOS Gateway (scripts/ceph-rgw): a production S3 server
/// that checks SigV4 signatures and Content-MD5.
public final class CephGateway: S3TestServer {
    public let name = "ceph-rgw"
    public let endpoint: String
    public let accessKeyId: String
    public let secretAccessKey: String
    /// With `start(https: true)`: the TLS endpoint and the PEM of its self-signed certificate.
    public let httpsEndpoint: String?
    public let caBundle: String?
    /// With `start(sts: true)`: the role the S3 user may assume (s3:* on every bucket).
    public let roleArn: String?
    private let directory: URL

    private init(endpoint: String, accessKeyId: String, secretAccessKey: String, directory: URL,
                 httpsEndpoint: String?, caBundle: String?, roleArn: String?) {
        self.endpoint = endpoint; self.accessKeyId = accessKeyId; self.secretAccessKey = secretAccessKey
        self.directory = directory; self.httpsEndpoint = httpsEndpoint; self.caBundle = caBundle; self.roleArn = roleArn
    }

    /// The file whose offset radosgw's clock follows (`start(movableClock: true)`).
    private var clockFile: URL { directory.appendingPathComponent("rgw-clock") }

    /// Whether radosgw is installed (the test command installs it).
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/radosgw") }

    /// `sts`: it also serves STS, with a role to assume (`roleArn`); `movableClock`:
    /// radosgw runs under libfaketime, its clock moved by `moveClock(to:)`.
    public static func start(https: Bool = false, sts: Bool = false, movableClock: Bool = false) async throws -> CephGateway {
        let script = TestPaths.repositoryRoot.appendingPathComponent("scripts/ceph-rgw/rgw-up.sh").path
        var directory = try TestPaths.temporaryDirectory("rgw")
        // A port free when chosen can still be taken before radosgw binds it
        // (another test's server): then the gateway starts again on another.
        for attempt in 1... {
            let port = TestPaths.freePort()
            var options = https ? ["RGW_SSL_PORT": "\(TestPaths.freePort())"] : [:]
            if sts { options["RGW_STS"] = "1" }
            if movableClock { options["RGW_CLOCK_FILE"] = directory.appendingPathComponent("rgw-clock").path }
            do {
                try await runChecked(script, [directory.appendingPathComponent("cluster").path, "\(port)"], environment: options, timeout: 180)
                break
            } catch let error as CommandFailed where attempt < 3 && Self.lostItsPort(directory) {
                print("ceph gateway: port \(port) was taken before radosgw bound it; starting again (\(error.description.prefix(200)))")
                try? FileManager.default.removeItem(at: directory)
                directory = try TestPaths.temporaryDirectory("rgw")
            }
        }
        let env = try String(contentsOf: directory.appendingPathComponent("cluster/s3.env"), encoding: .utf8)
        func value(_ name: String) -> String {
            env.split(separator: "\n").first { $0.contains("\(name)=") }
                .map { String($0.split(separator: "=", maxSplits: 1)[1]) } ?? ""
        }
        return CephGateway(endpoint: value("AWS_ENDPOINT_URL"), accessKeyId: value("AWS_ACCESS_KEY_ID"),
                           secretAccessKey: value("AWS_SECRET_ACCESS_KEY"), directory: directory,
                           httpsEndpoint: https ? value("S3_HTTPS_ENDPOINT") : nil, caBundle: https ? value("AWS_CA_BUNDLE") : nil,
                           roleArn: sts ? value("S3_ROLE_ARN") : nil)
    }

    /// Puts radosgw's clock `seconds` from the machine's, and waits until its
    /// answers' `Date` shows it (libfaketime reads the file again within seconds).
    public func moveClock(to seconds: Int) async throws {
        try "\(seconds >= 0 ? "+" : "")\(seconds)\n".write(to: clockFile, atomically: true, encoding: .utf8)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        for _ in 0..<100 {
            let head = try await runCommand("curl", ["-sI", "-m", "2", endpoint + "/"], timeout: 5).stdout
            let date = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("date:") }
                .flatMap { formatter.date(from: $0.dropFirst(5).trimmingCharacters(in: .whitespaces)) }
            if let date, abs(date.timeIntervalSinceNow - Double(seconds)) < 3 { return }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw CommandFailed(description: "radosgw's clock did not move to \(seconds) s within 20 s")
    }

    /// Whether radosgw or the monitor (or rgw-up.sh's own check) found its port in use.
    private static func lostItsPort(_ directory: URL) -> Bool {
        let logs = ["rgw.a.out", "mon.a.out"].map {
            (try? String(contentsOf: directory.appendingPathComponent("cluster/log/\($0)"), encoding: .utf8)) ?? ""
        }
        return logs.contains { $0.contains("Address already in use") }
            || !FileManager.default.fileExists(atPath: directory.appendingPathComponent("cluster/ceph.conf").path)
    }

    public func stop() async {
        let script = TestPaths.repositoryRoot.appendingPathComponent("scripts/ceph-rgw/rgw-down.sh").path
        _ = try? await runCommand(script, [directory.appendingPathComponent("cluster").path, "--purge"])
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Whether an HTTP server answers at `url` (any status).
public func httpAnswers(_ url: String) async -> Bool {
    let result = try? await runCommand("curl", ["-s", "-o", "/dev/null", "-m", "2", url], timeout: 5)
    return result?.status == 0
}

/// boto3, through Tests/python/s3_client.py.
public struct Boto3: Sendable {
    public let server: any S3TestServer

    public init(_ server: any S3TestServer) { self.server = server }

    @discardableResult
    public func callAsFunction(_ arguments: String...) async throws -> String {
        try await run(arguments, timeout: 120)
    }

    /// The same with a longer bound, for bulk commands (thousands of objects on a loaded machine).
    @discardableResult
    public func run(_ arguments: [String], timeout: Double) async throws -> String {
        try await runChecked("python3", [TestPaths.python.appendingPathComponent("s3_client.py").path, server.endpoint] + arguments,
                             environment: server.clientEnvironment, timeout: timeout)
    }

    public struct ObjectHead: Decodable, Sendable {
        public var ETag: String
        public var ContentLength: Int64
        public var ContentType: String?
        public var Metadata: [String: String]
    }

    /// Downloads an object to `file` and returns its attributes.
    public func get(bucket: String, key: String, to file: URL) async throws -> ObjectHead {
        try JSONDecoder().decode(ObjectHead.self, from: Data(try await self("get", bucket, key, file.path).utf8))
    }
}
