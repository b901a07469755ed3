import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// A worker added to a busy fleet on the embedded broker takes work within
/// seconds, with no Kafka settings given: the worker recognises Ferry's
/// embedded cluster and gives its consumer groups a short session timeout,
/// which that cluster's coordinator waits out on every rebalance (with
/// librdkafka's default of 45 s the new worker measured 89 s idle).
@Suite(.serialized) struct ScaleOutTests {
    @Test func aWorkerJoiningABusyFleetTakesWorkWithinSeconds() async throws {
        let moto = try await MotoServer.start(logDirectory: try TestPaths.temporaryDirectory("scale-out-moto"))
        do {
            try await EndToEndTests().withEnvironment(moto) { env in
                let source = env.dataRoot.appendingPathComponent("in/256k.bin")
                try FileManager.default.createDirectory(at: source.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data(repeating: 0x5A, count: 256 << 10).write(to: source)
                // 1 MiB/s a worker: 300 uploads of 256 KiB keep one worker busy for over a minute.
                let slow = ["--bandwidth-limit", "1MiB", "--max-transfers", "2"]
                let first = try env.startWorker(name: "first", stateDir: "state-first", extra: slow + ["--worker-id", "first"])
                try await env.kcat.produceMany(topic: "ferry.requests", (0..<300).map { i in
                    ("\(env.bucket)/join/\(i)", """
                        {"id":"join-\(i)","op":"upload","bucket":"\(env.bucket)","key":"join/\(i).bin","source":"\(source.absoluteString)"}
                        """)
                })
                func completed(by worker: String) async throws -> Int {
                    try await env.statuses().filter { $0.worker == worker && $0.state == .completed }.count
                }
                #expect(try await eventually(timeout: 90, every: 0.5) { try await completed(by: "first") > 0 },
                        "the first worker never completed a transfer:\n\(first.log.suffix(3000))")

                let joined = Date()
                let second = try env.startWorker(name: "second", stateDir: "state-second", extra: slow + ["--worker-id", "second"])
                let tookWork = try await eventually(timeout: 90, every: 0.5) { try await completed(by: "second") > 0 }
                let seconds = Date().timeIntervalSince(joined)
                #expect(tookWork && seconds < 30,
                        "the second worker's first completed transfer came \(Int(seconds)) s after it started:\n\(second.log.suffix(3000))")
                #expect(second.log.contains("embedded cluster: consumer groups use session.timeout.ms=6000"))
                // Neither worker stopped on the rebalance.
                #expect(first.isRunning && second.isRunning)
                _ = await second.stop()
                _ = await first.stop()
            }
        } catch {
            await moto.stop()
            throw error
        }
        await moto.stop()
    }
}
