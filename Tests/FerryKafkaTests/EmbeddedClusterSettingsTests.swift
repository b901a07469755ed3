import FerryKafka
import Foundation
import Glibc
import Logging
import Testing

/// Consumer groups on the embedded cluster get its short session timeout and heartbeat;
/// on any other cluster, and wherever the operator set one, nothing changes.
/// Its brokers answer without Nagle's delay, as a real broker does.
@Suite struct EmbeddedClusterSettingsTests {
    @Test func theEmbeddedClusterIsRecognisedByItsId() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: Logger(label: "test.embedded"))
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers),
                                         logger: Logger(label: "test.embedded"))
        let id = try #require(await producer.clusterId())
        #expect(EmbeddedKafkaCluster.isEmbedded(clusterId: id), "cluster id \(id)")
        let tuned = EmbeddedKafkaCluster.groupConfiguration(KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), clusterId: id)
        #expect(tuned["session.timeout.ms"] == "\(EmbeddedKafkaCluster.groupSessionTimeoutMs)")
        #expect(tuned["heartbeat.interval.ms"] == "\(EmbeddedKafkaCluster.groupHeartbeatIntervalMs)")
    }

    @Test func otherClustersAndExplicitSettingsAreLeftAlone() {
        let plain = KafkaConfiguration(bootstrapServers: "broker:9092")
        // A real cluster's id (a base64 UUID), or no answer from the brokers.
        #expect(EmbeddedKafkaCluster.groupConfiguration(plain, clusterId: "MkU3OEVBNTcwNTJENDM2Qk")["session.timeout.ms"] == nil)
        #expect(EmbeddedKafkaCluster.groupConfiguration(plain, clusterId: nil)["session.timeout.ms"] == nil)
        var explicit = plain
        explicit["session.timeout.ms"] = "45000"
        #expect(EmbeddedKafkaCluster.groupConfiguration(explicit, clusterId: "mockCluster1a2b")["session.timeout.ms"] == "45000")
        #expect(EmbeddedKafkaCluster.groupConfiguration(explicit, clusterId: "mockCluster1a2b")["heartbeat.interval.ms"] == nil)
        var heartbeat = plain
        heartbeat["heartbeat.interval.ms"] = "2500"
        #expect(EmbeddedKafkaCluster.groupConfiguration(heartbeat, clusterId: "mockCluster1a2b")["heartbeat.interval.ms"] == "2500")
    }

    @Test func noBrokerMeansNoClusterId() async throws {
        // Nothing listens on port 1: the probe gives up after its timeout instead of hanging.
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: "127.0.0.1:1", ["log_level": "0"]),
                                         logger: Logger(label: "test.embedded"))
        #expect(await producer.clusterId(timeoutMs: 500) == nil)
    }

    /// The broker side of every connection to the embedded cluster has
    /// TCP_NODELAY. Without it a producer's pipelined requests (one per
    /// partition) got their responses about 44 ms late: 500 messages over 16
    /// partitions took 48 ms to be acknowledged, and 3.7 ms with it. Checked
    /// on the socket itself, not by timing: the cluster runs in this process,
    /// so its accepted sockets are among this process's descriptors.
    @Test func theEmbeddedBrokersSocketsDisableNagle() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: Logger(label: "test.embedded"))
        for topic in ["t.a", "t.b"] { try cluster.createTopic(topic, partitions: 8) }
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers),
                                         logger: Logger(label: "test.embedded"))
        let messages = (0..<64).map { OutgoingMessage(topic: $0 % 2 == 0 ? "t.a" : "t.b", key: Array("k\($0)".utf8), value: [1, 2, 3]) }
        #expect(await producer.sendAll(messages).allSatisfy { (try? $0.get()) != nil })
        let brokerPort = try #require(cluster.bootstrapServers.split(separator: ":").last.flatMap { UInt16($0) })
        var brokerSide: [Int32: Int32] = [:]  // descriptor → TCP_NODELAY
        for name in try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            guard let fd = Int32(name) else { continue }
            var address = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let named = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            var peer = sockaddr_in()
            var peerLength = socklen_t(MemoryLayout<sockaddr_in>.size)
            let connected = withUnsafeMutablePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &peerLength) }
            }
            // An accepted connection: its own port is the broker's, and it has a peer (the listener has none).
            guard named == 0, connected == 0, address.sin_family == sa_family_t(AF_INET),
                  UInt16(bigEndian: address.sin_port) == brokerPort else { continue }
            var flag: Int32 = 0
            var flagLength = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &flag, &flagLength) == 0 else { continue }
            brokerSide[fd] = flag
        }
        #expect(!brokerSide.isEmpty, "no broker-side connection found for port \(brokerPort)")
        #expect(brokerSide.values.allSatisfy { $0 != 0 }, "TCP_NODELAY per broker-side descriptor: \(brokerSide)")
    }

    /// A producer's delivery timeout, from any duration a caller passes, is one
    /// librdkafka accepts (1 s…2^31−1 ms here), and never replaces the operator's.
    @Test(arguments: [(Duration.seconds(30), "30000"), (.zero, "1000"), (.seconds(Int64.max), "2147483647"),
                      (.milliseconds(-5), "1000"), (.microseconds(1500), "1000")])
    func deliveryTimeoutsAreClampedToLibrdkafkasRange(timeout: Duration, expected: String) throws {
        let configuration = KafkaConfiguration(bootstrapServers: "127.0.0.1:1").withDeliveryTimeout(timeout)
        #expect(configuration["message.timeout.ms"] == expected)
        // librdkafka takes it.
        _ = try KafkaProducer(configuration: configuration, logger: Logger(label: "test.delivery"))
        let set = KafkaConfiguration(bootstrapServers: "x", ["message.timeout.ms": "1234"]).withDeliveryTimeout(timeout)
        #expect(set["message.timeout.ms"] == "1234")
    }
}
