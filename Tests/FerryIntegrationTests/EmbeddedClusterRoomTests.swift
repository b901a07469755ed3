import FerryClient
import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// The embedded cluster keeps 5 MiB of each partition: a claim-checked upload
/// it cannot hold is refused by the producer with `RequestTooLarge`, and no
/// request is enqueued that a worker could not read.
@Suite struct EmbeddedClusterRoomTests {
    let logger: Logger = {
        var logger = Logger(label: "test.room")
        logger.logLevel = .critical
        return logger
    }()

    func cluster(uploadPartitions: Int) throws -> (EmbeddedKafkaCluster, Topics) {
        let topics = Topics()
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
        for topic in topics.all { try cluster.createTopic(topic, partitions: topic == topics.uploads ? uploadPartitions : 1) }
        return (cluster, topics)
    }

    func requestsEnqueued(_ cluster: EmbeddedKafkaCluster, _ topics: Topics) async throws -> Int64 {
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), logger: logger)
        return try await producer.watermarks(of: topics.requests).values.reduce(0) { $0 + $1.end }
    }

    func refusal(_ body: () async throws -> Void) async -> FerryError? {
        do {
            try await body()
            return nil
        } catch TransferClientError.invalidRequest(let error) {
            return error
        } catch {
            Issue.record("unexpected error: \(error)")
            return nil
        }
    }

    /// More bytes than the uploads topic keeps in all: refused before a chunk is sent.
    @Test func anUploadLargerThanTheTopicKeepsIsRefusedBeforeSending() async throws {
        let (cluster, topics) = try cluster(uploadPartitions: 1)
        let client = try TransferClient(bootstrapServers: cluster.bootstrapServers, logger: logger)
        let bytes = [UInt8](repeating: 7, count: 6 << 20)
        let error = await refusal { try await client.uploadData(bytes, .upload(from: "", to: "photos", key: "big.bin")) }
        #expect(error?.code == .requestTooLarge)
        #expect(error?.message.contains("do not fit the embedded Kafka cluster") == true, "\(String(describing: error))")
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), logger: logger)
        #expect(try await producer.watermarks(of: topics.uploads)[0]?.end == 0, "chunks were sent")
        #expect(try await requestsEnqueued(cluster, topics) == 0)
    }

    /// 19 chunks of 512 KiB over 2 partitions: one partition gets at least 10,
    /// more than its 5 MiB, so the first of them are gone once all are sent.
    /// The request that would name them is not enqueued; a smaller one is.
    @Test func anUploadWhoseChunksWereDroppedIsNotEnqueued() async throws {
        let (cluster, topics) = try cluster(uploadPartitions: 2)
        let client = try TransferClient(bootstrapServers: cluster.bootstrapServers, logger: logger)
        let bytes = [UInt8](repeating: 9, count: 19 * ChunkedSource.maxChunkBytes)
        let error = await refusal { try await client.uploadData(bytes, .upload(from: "", to: "photos", key: "big.bin")) }
        #expect(error?.code == .requestTooLarge)
        #expect(error?.message.contains("were dropped by the embedded Kafka cluster") == true, "\(String(describing: error))")
        #expect(try await requestsEnqueued(cluster, topics) == 0)

        try await client.uploadData([UInt8](repeating: 1, count: 1 << 20), .upload(from: "", to: "photos", key: "small.bin"))
        #expect(try await requestsEnqueued(cluster, topics) == 1)
    }
}
