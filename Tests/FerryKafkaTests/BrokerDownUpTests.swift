import FerryKafka
import FerryTestSupport
import Foundation
import Glibc
import Logging
import Synchronization
import Testing

/// What a broker taken down leaves of its port, which the test servers'
/// port-0 binds rely on: librdkafka's mock keeps the port bound (no listener:
/// connections are refused) and listens on it again when the broker comes
/// back, aborting the whole process if it cannot (a test run died that way).
/// A socket without SO_REUSEADDR cannot bind the port meanwhile; one with
/// SO_REUSEADDR can, when it names the port. A port-0 bind was not seen to
/// land there with either: with the ephemeral range narrowed to ten ports, all
/// taken, the next SO_REUSEADDR bind failed rather than share the held one.
/// Test servers bind port 0 without SO_REUSEADDR all the same. What aborted
/// test runs (librdkafka 2.0.2 asserts when the down broker cannot bind its
/// port again, right after closing its listener) was a child being spawned at
/// that moment: it holds the listening socket until it execs. `SpawnLock`
/// keeps the two apart.
@Suite struct BrokerDownUpTests {
    static func port(of broker: Int, in cluster: EmbeddedKafkaCluster) throws -> UInt16 {
        let address = cluster.bootstrapServers.split(separator: ",")[broker - 1]
        return try #require(UInt16(address.split(separator: ":").last ?? ""))
    }

    /// 0 when a socket can bind 127.0.0.1:`port` (and listen, for a listener), else errno.
    static func bindError(_ port: UInt16, listening: Bool, reuseAddress: Bool = false) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var on: Int32 = 1
        if reuseAddress { _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size)) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if bound != 0 { return errno }
        return listening && listen(fd, 1) != 0 ? errno : 0
    }

    static func connects(_ port: UInt16) -> Bool { TestPaths.acceptsConnections(port: Int(port)) }

    @Test func aBrokerDownKeepsItsPortFromSocketsWithoutAddressReuse() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 2, logger: Logger(label: "test.down-up"))
        try cluster.createTopic("t", partitions: 2)
        let port = try Self.port(of: 2, in: cluster)
        for round in 0..<5 {
            cluster.setBroker(2, up: false)
            #expect(!Self.connects(port), "round \(round): refused while down")
            #expect(Self.bindError(port, listening: false) == EADDRINUSE, "round \(round)")
            #expect(Self.bindError(port, listening: true) == EADDRINUSE, "round \(round)")
            // The hazard: with SO_REUSEADDR the port can be had (and is let go again here at once).
            #expect(Self.bindError(port, listening: false, reuseAddress: true) == 0, "round \(round)")
            cluster.setBroker(2, up: true)
            #expect(Self.connects(port), "round \(round): listening again")
        }
        // And the cluster serves: messages to both partitions (one led by each broker) are delivered.
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers),
                                         logger: Logger(label: "test.down-up"))
        for n in 0..<8 { try await producer.send(topic: "t", key: "k\(n)", value: Array("m".utf8)) }
    }

    /// Down/up rounds while other threads spawn children without pause. A
    /// child holds a copy of the process's descriptors until it execs, the
    /// listener of a broker going down among them, so the mock's rebind of
    /// the port failed and it aborted this process (rdkafka_mock.c:2100):
    /// without `SpawnLock` in three runs of three, within the first second.
    @Test func aBrokerGoesDownWhileChildrenAreSpawned() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 2, logger: Logger(label: "test.down-up"))
        try cluster.createTopic("t", partitions: 2)
        final class Spawning: Sendable {
            let stop = Atomic<Bool>(false)
            let count = Atomic<Int>(0)
        }
        let spawning = Spawning()
        let spawners = (0..<3).map { _ in
            Task.detached { [spawning] in
                while !spawning.stop.load(ordering: .relaxed) {
                    _ = try? await runCommand("/bin/true", [])
                    spawning.count.add(1, ordering: .relaxed)
                }
            }
        }
        for _ in 0..<200 {
            cluster.setBroker(2, up: false)
            try await Task.sleep(for: .milliseconds(5))
            cluster.setBroker(2, up: true)
            try await Task.sleep(for: .milliseconds(5))
        }
        spawning.stop.store(true, ordering: .relaxed)
        for spawner in spawners { _ = await spawner.result }
        #expect(spawning.count.load(ordering: .relaxed) > 200, "children spawned beside the rounds")
        #expect(Self.connects(try Self.port(of: 2, in: cluster)), "listening again")
    }
}
