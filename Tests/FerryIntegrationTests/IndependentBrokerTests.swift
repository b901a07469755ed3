import FerryCore
import FerryS3
import FerryLocalStore
import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// The fleet on a Kafka-compatible broker that librdkafka did not write
/// (Tansu, see `TansuBroker`): every other Kafka test runs on librdkafka's
/// mock cluster, whose group coordinator and fetch answers are librdkafka's
/// own idea of the protocol.
@Suite(.serialized) struct IndependentBrokerTests {
    /// Two workers share a backlog on Tansu; one is SIGKILLed mid-way and
    /// started again. Every request still ends `completed` on `ferry.status`,
    /// every object is stored and has its ObjectCreated event on `ferry.events`,
    /// and both workers did some of the work (the group spread the partitions).
    @Test func aFleetOnTansuLosesNoRequestThroughAKill() async throws {
        let base = try TestPaths.temporaryDirectory("tansu")
        let broker = try await TansuBroker.start(logDirectory: base, partitions: 4)
        let data = base.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        let store = base.appendingPathComponent("store")
        // Tansu holds a JoinGroup for half the group's session timeout: 6 s makes joins take 3 s.
        func worker(_ name: String) throws -> BackgroundProcess {
            try WorkerCommandLine(bootstrapServers: broker.bootstrapServers, storage: .local(store), dataRoot: data,
                                  stateDirectory: base.appendingPathComponent("state-\(name)"), workerId: name, roles: "transfers", logLevel: "info",
                                  extra: ["--max-transfers", "2", "--http-address", "127.0.0.1:0", "--kafka-property", "session.timeout.ms=6000"])
                .start(name: name, environment: broker.environment, logDirectory: base)
        }
        var first = try worker("first")
        let second = try worker("second")

        let count = 3000
        let payload = Data((0..<1024).map { UInt8(truncatingIfNeeded: $0 &* 31) }).base64EncodedString()
        try await broker.kcat.produceMany(topic: "ferry.requests", (0..<count).map { i in
            (key: "tansu/k\(i)", value: #"{"id":"t-\#(i)","op":"upload","bucket":"tansu","key":"k\#(i).bin","source":"data:;base64,\#(payload)"}"#)
        })
        func completed() async throws -> [String: String] {
            var workers: [String: String] = [:]
            for status in try await broker.kcat.consumeAll(topic: "ferry.status").compactMap({
                try? JSONDecoder().decode(TransferStatus.self, from: Data($0.value.utf8))
            }) where status.state == .completed {
                workers[status.id] = status.worker
            }
            return workers
        }

        // Killed once it has done some of the work (its own count, which is current; the status
        // topic lags), then started again on the same state.
        let metrics = try await first.workerHTTPEndpoint() + "/metrics"
        func completedByFirst() async -> Int {
            let text = (try? await runCommand("curl", ["-sf", metrics], timeout: 10).stdout) ?? ""
            return text.split(separator: "\n").filter { $0.hasPrefix("ferry_transfers_total{") && $0.contains("completed") }
                .compactMap { Double($0.split(separator: " ").last ?? "") }.reduce(0) { $0 + Int($1) }
        }
        let clock = ContinuousClock.now
        let started = await eventually(timeout: 240, every: 0.1) { await completedByFirst() >= 100 }
        let killedAt = ContinuousClock.now - clock
        #expect(started, "the first worker completed nothing on Tansu:\n\(first.log.suffix(4000))")
        #expect(await first.stop(signal: SIGKILL) == 128 + SIGKILL)
        let atKill = try await completed().count
        #expect(atKill < count, "the backlog was drained before the kill: nothing was left to redeliver")
        first = try worker("first")

        var done: [String: String] = [:]
        // Generous: a full suite on two cores once took 202 s for this test (75 s in another run).
        let all = await eventually(timeout: 600, every: 2) {
            done = (try? await completed()) ?? done
            return done.count == count
        }
        print("Tansu: killed \(killedAt) after the first worker's start, \(atKill) of \(count) requests completed then; "
              + "all \(done.count) completed \(ContinuousClock.now - clock) after its start, "
              + "per worker \(Dictionary(grouping: done.values, by: { $0 }).mapValues(\.count))")
        #expect(all, "\(count - done.count) request(s) never completed:\nfirst:\n\(first.log.suffix(3000))\nsecond:\n\(second.log.suffix(3000))")
        #expect(Set(done.values) == ["first", "second"], "work per worker: \(Dictionary(grouping: done.values, by: { $0 }).mapValues(\.count))")

        // Tansu 0.6 answers committed offsets without their metadata, where the crash-loop breaker keeps its
        // start records: each worker process says so, once (the second ran throughout; the first was restarted).
        let dropped = "the broker does not keep offset commit metadata"
        #expect(second.log.components(separatedBy: dropped).count - 1 == 1, "second:\n\(second.log.suffix(3000))")
        #expect(first.log.contains(dropped))
        let created = Set(try await broker.kcat.consumeAll(topic: "ferry.events").map(\.key))
        let missing = (0..<count).map { "tansu/public/k\($0).bin" }.filter { !created.contains($0) }
        #expect(missing.isEmpty, "no ObjectCreated event for \(missing.prefix(5)) (\(missing.count) in all)")
        _ = await first.stop()
        _ = await second.stop()
        await broker.stop()

        // Objects are the index's `.json` entries (as a listing reads them). A write cut by the kill
        // may leave its blob and temp entry (at most one per transfer slot, 2). Aged past the
        // grace (as an hour would), a reclaim pass leaves exactly one blob per object and no temp entry.
        let index = store.appendingPathComponent("tansu/index"), blobs = store.appendingPathComponent("tansu/blobs")
        func entries(_ dir: URL) -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? [] }
        let litter = entries(index).filter { !$0.hasSuffix(".json") }
        let extraBlobs = entries(blobs).count - count
        #expect(litter.count <= 2 && litter.allSatisfy { $0.hasPrefix(".tmp-") }, "left in the index: \(litter)")
        for path in litter.map({ index.appendingPathComponent($0).path }) + entries(blobs).map({ blobs.appendingPathComponent($0).path }) {
            TestPaths.age(path, seconds: 3600)
        }
        let reclaimed = try await LocalObjectStore(root: store).reclaimAbandonedWrites()
        print("Tansu: the kill left \(litter.count) temp entries and \(extraBlobs) unnamed blobs; reclaimed \(reclaimed)")
        #expect(reclaimed.tempEntries == litter.count && reclaimed.blobs == extraBlobs && reclaimed.skipped.isEmpty, "\(reclaimed)")
        #expect(entries(index).filter { $0.hasSuffix(".json") }.count == count && entries(index).count == count,
                "index after the reclaim: \(entries(index).count) names")
        #expect(entries(blobs).count == count, "\(entries(blobs).count) blobs for \(count) objects")
        try? FileManager.default.removeItem(at: base)
    }
}
