import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// `ferry reconcile` against a store without notifications (moto): 10,000
/// objects written behind Ferry's back are announced once; after 100 more,
/// 20 overwrites and 50 deletes (and writes and deletes through Ferry, which
/// announced themselves) exactly those 170 changes are announced; a third run
/// announces none.
@Suite(.serialized) struct ReconcileTests {
    let logger = Logger(label: "test.reconcile")

    @Test func reconcileAnnouncesExactlyWhatIsMissing() async throws {
        let base = try TestPaths.temporaryDirectory("reconcile")
        try await MotoServer.start(logDirectory: base).stopAfter { moto in try await run(moto, base: base) }
        try? FileManager.default.removeItem(at: base)
    }

    func run(_ moto: MotoServer, base: URL) async throws {
        // The embedded cluster keeps 5 MiB per partition: 16 partitions for 10,000 events and records.
        let cluster = try EmbeddedKafkaCluster(brokers: 1, logger: logger)
        for topic in Topics().all { try cluster.createTopic(topic, partitions: [Topics().events, Topics().streams].contains(topic) ? 16 : 2) }
        let dataRoot = base.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: dataRoot, withIntermediateDirectories: true)
        let env = EndToEndTests.Environment(cluster: cluster, kcat: Kcat(bootstrapServers: cluster.bootstrapServers), dataRoot: dataRoot,
                                            logs: base, server: moto, bucket: "recon")
        let s3 = Boto3(moto)
        try await s3("create-bucket", "recon")
        let worker = try env.startWorker(name: "worker-recon", stateDir: "state", extra: ["--role", "transfers"])
        let source = dataRoot.appendingPathComponent("f.txt")
        try Data("through ferry\n".utf8).write(to: source)
        func ferryWrites(_ range: Range<Int>) async throws {
            try await env.kcat.produceMany(topic: "ferry.requests", range.map { n in
                (key: "recon/f-\(n)", value: #"{"id":"f-\#(n)","op":"upload","bucket":"recon","key":"f-\#(n)","source":"\#(source.absoluteString)"}"#)
            })
        }
        try await ferryWrites(0..<10)
        // 10,000 PUTs to moto: a minute or more alone (the whole test: 106 s), over two minutes beside the rest of the suite on 2 cores.
        try await s3.run(["put-many", "recon", "recon/o-", "10000"], timeout: 600)
        #expect(try await eventually(timeout: 60) { try await env.statuses().filter { $0.state == .completed }.count >= 10 })

        func reconcile() async throws -> String {
            let out = try await runChecked(TestPaths.ferryBinary, ["reconcile", "--bucket", "recon", "--bootstrap-servers", cluster.bootstrapServers,
                                                                  "--s3-endpoint", moto.endpoint, "--region", "us-east-1",
                                                                  "--state-dir", base.appendingPathComponent("reconcile-state").path],
                                           environment: moto.clientEnvironment, timeout: 600)
            print("reconcile: \(out)")
            return out
        }
        func announced() async throws -> Int {
            try await env.kcat.consumeAll(topic: "ferry.events").filter { $0.value.contains(#""principalId":"ferry-reconcile""#) }.count
        }
        // 1. Everything written behind Ferry's back; Ferry's own 10 writes are known from the events topic.
        let first = try await reconcile()
        #expect(first.contains("listed 10010 in 11 page(s): announced 10000 created, 0 modified, 0 removed"), "\(first)")
        #expect(try await announced() == 10_000)

        // 2. More behind its back, and more through Ferry (which announces its own).
        try await s3("put-many", "recon", "recon/n-", "100")
        try await s3("put-many", "recon", "recon/o-", "20", "100", "-changed")
        try await runChecked("python3", [TestPaths.python.appendingPathComponent("s3_client.py").path, moto.endpoint, "delete-many", "recon"]
                             + (0..<50).map { String(format: "recon/o-%04d", $0 + 5000) }, environment: moto.clientEnvironment)
        try await ferryWrites(10..<20)
        try await env.kcat.produceMany(topic: "ferry.requests", (0..<5).map { n in
            (key: "recon/f-\(n)", value: #"{"id":"fd-\#(n)","op":"delete","bucket":"recon","key":"f-\#(n)"}"#)
        })
        #expect(try await eventually(timeout: 60) { try await env.statuses().filter { $0.state == .completed }.count >= 25 })
        let second = try await reconcile()
        #expect(second.contains("announced 100 created, 20 modified, 50 removed"), "\(second)")
        #expect(try await announced() == 10_170)

        // 3. Nothing left to announce.
        let third = try await reconcile()
        #expect(third.contains("announced 0 created, 0 modified, 0 removed"), "\(third)")
        #expect(try await announced() == 10_170)

        // 4. An endpoint that answers 200 with something other than a listing (a proxy's
        // page): the run fails with the reason and announces nothing. Read as an empty
        // listing, it had announced every one of the 10,070 keys removed.
        let portal = try HTTPAnswerer(head: "HTTP/1.1 200 OK\r\nContent-Type: text/html", body: "<html><body>Sign in to continue</body></html>")
        let refused = try await runCommand(TestPaths.ferryBinary, ["reconcile", "--bucket", "recon", "--bootstrap-servers", cluster.bootstrapServers,
                                                                  "--s3-endpoint", "http://127.0.0.1:\(portal.port)", "--region", "us-east-1",
                                                                  "--state-dir", base.appendingPathComponent("reconcile-state").path],
                                           environment: moto.clientEnvironment, timeout: 600)
        #expect(refused.status != 0, "\(refused.stdout)")
        #expect(refused.stderr.contains("not a whole ListBucketResult document: its root element is <html>"), "\(refused.stderr)")
        #expect(try await announced() == 10_170)
        let peak = first.split(separator: "\n").last.flatMap { $0.components(separatedBy: "peak memory ").last } ?? "?"
        print("reconcile of 10,000 objects: peak memory \(peak)")
        await worker.stop()
    }
}
