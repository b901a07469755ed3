import FerryKafka
import Logging
import Testing

/// Consumer groups on the embedded cluster get its short session timeout;
/// on any other cluster, and wherever the operator set one, nothing changes.
@Suite struct EmbeddedClusterSettingsTests {
    @Test func theEmbeddedClusterIsRecognisedByItsId() async throws {
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: Logger(label: "test.embedded"))
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers),
                                         logger: Logger(label: "test.embedded"))
        let id = try #require(await producer.clusterId())
        #expect(EmbeddedKafkaCluster.isEmbedded(clusterId: id), "cluster id \(id)")
        let tuned = EmbeddedKafkaCluster.groupConfiguration(KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), clusterId: id)
        #expect(tuned["session.timeout.ms"] == "\(EmbeddedKafkaCluster.groupSessionTimeoutMs)")
    }

    @Test func otherClustersAndExplicitSettingsAreLeftAlone() {
        let plain = KafkaConfiguration(bootstrapServers: "broker:9092")
        // A real cluster's id (a base64 UUID), or no answer from the brokers.
        #expect(EmbeddedKafkaCluster.groupConfiguration(plain, clusterId: "MkU3OEVBNTcwNTJENDM2Qk")["session.timeout.ms"] == nil)
        #expect(EmbeddedKafkaCluster.groupConfiguration(plain, clusterId: nil)["session.timeout.ms"] == nil)
        var explicit = plain
        explicit["session.timeout.ms"] = "45000"
        #expect(EmbeddedKafkaCluster.groupConfiguration(explicit, clusterId: "mockCluster1a2b")["session.timeout.ms"] == "45000")
    }

    @Test func noBrokerMeansNoClusterId() async throws {
        // Nothing listens on port 1: the probe gives up after its timeout instead of hanging.
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: "127.0.0.1:1", ["log_level": "0"]),
                                         logger: Logger(label: "test.embedded"))
        #expect(await producer.clusterId(timeoutMs: 500) == nil)
    }
}
