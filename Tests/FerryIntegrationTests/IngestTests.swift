import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// Every write to the bucket is an event, not only Ferry's: the real Ceph
/// gateway pushes its own bucket notifications (an SNS topic with a push
/// endpoint at the worker, a bucket notification configuration) to a worker
/// with the ingest role. Objects written by boto3 and by curl through a
/// presigned URL run the audit trigger once each and yield one `objects`
/// record each; deletes yield ObjectRemoved and REMOVE; writes made through
/// Ferry itself still yield one event each, not two; a forged notification
/// is refused and publishes nothing.
@Suite(.serialized) struct IngestTests {
    let logger = Logger(label: "test.ingest")

    @Test(.enabled(if: CephGateway.isInstalled || ProcessInfo.processInfo.environment["CI"] != nil))
    func storeNotificationsRunTriggersOncePerWrite() async throws {
        try await CephGateway.start().stopAfter { rgw in try await run(rgw) }
    }

    func run(_ rgw: CephGateway) async throws {
        let base = try TestPaths.temporaryDirectory("ingest")
        let env = try EndToEndTests.Environment.oneBroker(base: base, server: rgw, bucket: "ingest", logger: logger)
        let s3 = Boto3(rgw)
        try await s3("create-bucket", "ingest")
        let token = "ingest-token-\(UUID().uuidString.prefix(8))"
        let tokenFile = base.appendingPathComponent("ingest.token")
        try token.write(to: tokenFile, atomically: true, encoding: .utf8)
        let worker = try env.startWorker(name: "worker-ingest", stateDir: "state", extra: [
            "--role", "transfers,triggers,ingest", "--http-address", "127.0.0.1:0", "--ingest-token-file", tokenFile.path, "--ingest-bucket", "ingest",
        ])
        defer { try? FileManager.default.removeItem(at: base) }
        let http = try await worker.workerHTTPEndpoint()
        #expect(await eventually(timeout: 30) { (try? await curl("\(http)/healthz").status) == 200 })
        try await s3("notify", "ingest", "\(http)/notifications/s3?token=\(token)", "ferry-ingest")

        // A forged notification: refused, logged, nothing published.
        let forged = #"{"Records":[{"eventName":"ObjectCreated:Put","eventSource":"ceph:s3","s3":{"bucket":{"name":"ingest"},"object":{"key":"forged.txt","size":1,"eTag":"x"}}}]}"#
        let refused = try await curl("-X", "POST", "-H", "content-type: application/json", "--data", forged,
                                     "\(http)/notifications/s3?token=wrong-token-0000000")
        #expect(refused.status == 401)
        let anonymous = try await curl("-X", "POST", "--data", forged, "\(http)/notifications/s3")
        #expect(anonymous.status == 401)
        #expect(await eventually(timeout: 10) { worker.log.contains("refused a notification from") })

        // 200 objects by boto3, 20 by curl through presigned URLs, 100 through Ferry.
        try await s3("put-many", "ingest", "boto/o-", "200")
        for n in 0..<20 {
            let url = try await runChecked(TestPaths.ferryBinary, ["presign", "put", "s3://ingest/pre/o-\(n)", "--s3-endpoint", rgw.endpoint,
                                                                   "--region", "us-east-1"], environment: rgw.clientEnvironment)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let put = try await runCommand("curl", ["-s", "-f", "-X", "PUT", "--data-binary", "presigned \(n)", url], environment: rgw.clientEnvironment)
            #expect(put.status == 0, "presigned PUT \(n): \(put.stderr)")
        }
        let source = env.dataRoot.appendingPathComponent("ferry.txt")
        try Data("through ferry\n".utf8).write(to: source)
        try await env.kcat.produceMany(topic: "ferry.requests", (0..<100).map { n in
            (key: "ingest/ferry/o-\(n)", value: #"{"id":"own-\#(n)","op":"upload","bucket":"ingest","key":"ferry/o-\#(n)","source":"\#(source.absoluteString)"}"#)
        })
        // 50 deletes behind Ferry's back, 10 through Ferry (announced once, by the worker).
        #expect(try await eventually(timeout: 60) { try await env.statuses().filter { $0.state == .completed }.count >= 100 })
        try await env.kcat.produceMany(topic: "ferry.requests", (0..<10).map { n in
            (key: "ingest/ferry/o-\(n)", value: #"{"id":"own-del-\#(n)","op":"delete","bucket":"ingest","key":"ferry/o-\#(n)"}"#)
        })
        try await runChecked("python3", [TestPaths.python.appendingPathComponent("s3_client.py").path, rgw.endpoint, "delete-many", "ingest"]
                             + (0..<50).map { String(format: "boto/o-%04d", $0) }, environment: rgw.clientEnvironment)

        struct Audit: Decodable { var eventName: String; var key: String; var sequencer: String? }
        func audit() -> [Audit] {
            let text = (try? String(contentsOf: env.triggerOutput.appendingPathComponent("audit/audit.jsonl"), encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { try? JSONDecoder().decode(Audit.self, from: Data($0.utf8)) }
        }
        func count(_ lines: [Audit], _ prefix: String, removed: Bool) -> Int {
            lines.filter { $0.key.hasPrefix(prefix) && $0.eventName.hasPrefix(removed ? "ObjectRemoved" : "ObjectCreated") }.count
        }
        let settled = await eventually(timeout: 300, every: 2) {
            let lines = audit()
            return count(lines, "boto/", removed: false) >= 200 && count(lines, "pre/", removed: false) >= 20
                && count(lines, "boto/", removed: true) >= 50 && count(lines, "public/ferry/", removed: false) >= 100
                && count(lines, "public/ferry/", removed: true) >= 10
        }
        try await Task.sleep(for: .seconds(15))  // time for any duplicate to show
        let lines = audit()
        #expect(settled, "boto \(count(lines, "boto/", removed: false)) pre \(count(lines, "pre/", removed: false)) removed \(count(lines, "boto/", removed: true)) ferry \(count(lines, "public/ferry/", removed: false))\n\(worker.log.suffix(3000))")
        // Exactly once per write (bucket, key, sequencer).
        let perWrite = Dictionary(grouping: lines, by: { "\($0.eventName) \($0.key) \($0.sequencer ?? "")" })
        #expect(perWrite.values.allSatisfy { $0.count == 1 }, "\(perWrite.filter { $0.value.count > 1 }.keys.sorted().prefix(5))")
        #expect(count(lines, "boto/", removed: false) == 200 && count(lines, "pre/", removed: false) == 20)
        #expect(count(lines, "boto/", removed: true) == 50)
        #expect(count(lines, "public/ferry/", removed: false) == 100, "Ferry's own writes announced twice?")
        #expect(count(lines, "public/ferry/", removed: true) == 10, "Ferry's own deletes announced twice?")
        #expect(!lines.contains { $0.key == "forged.txt" })

        // One objects record per write, from the notifications: INSERT for new keys, REMOVE for the deletes.
        let records = try await env.kcat.consumeAll(topic: "ferry.streams").compactMap { message -> (String, String)? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(message.value.utf8)) as? [String: Any],
                  let name = object["eventName"] as? String, (object["eventSourceARN"] as? String)?.contains("table/objects") == true,
                  let keys = (object["dynamodb"] as? [String: Any])?["Keys"] as? [String: Any],
                  let key = (keys["key"] as? [String: Any])?["S"] as? String else { return nil }
            return (name, key)
        }
        let foreign = records.filter { $0.1.hasPrefix("boto/") || $0.1.hasPrefix("pre/") }
        #expect(foreign.filter { $0.0 == "INSERT" }.count == 220, "\(Dictionary(grouping: foreign, by: \.0).mapValues(\.count))")
        #expect(foreign.filter { $0.0 == "REMOVE" }.count == 50)
        #expect(records.filter { $0.1.hasPrefix("public/ferry/") && $0.0 == "INSERT" }.count == 100)
        print("ingest from Ceph RGW: \(count(lines, "boto/", removed: false)) boto3 writes, \(count(lines, "pre/", removed: false)) presigned PUTs, \(count(lines, "boto/", removed: true)) deletes, \(count(lines, "public/ferry/", removed: false)) Ferry writes and \(count(lines, "public/ferry/", removed: true)) Ferry deletes: one audit line and one objects record each")
        await worker.stop()
    }
}

/// An HTTP request with curl: status and body.
func curl(_ arguments: String...) async throws -> (status: Int, body: String) {
    let result = try await runCommand("curl", ["-s", "-w", "\n%{http_code}"] + arguments, timeout: 30)
    var lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
    let status = Int(lines.popLast() ?? "") ?? 0
    return (status, lines.joined(separator: "\n"))
}
