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
        try await MotoServer.start(logDirectory: try TestPaths.temporaryDirectory("scale-out-moto")).stopAfter { moto in
            try await EndToEndTests().withEnvironment(moto) { env in
                let source = env.dataRoot.appendingPathComponent("in/256k.bin")
                try FileManager.default.createDirectory(at: source.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data(repeating: 0x5A, count: 256 << 10).write(to: source)
                // 1 MiB/s a worker: 500 uploads of 256 KiB keep one worker busy for two minutes.
                let slow = ["--bandwidth-limit", "1MiB", "--max-transfers", "2"]
                let first = try env.startWorker(name: "first", stateDir: "state-first", extra: slow + ["--worker-id", "first"])
                try await env.kcat.produceMany(topic: "ferry.requests", (0..<500).map { i in
                    ("\(env.bucket)/join/\(i)", """
                        {"id":"join-\(i)","op":"upload","bucket":"\(env.bucket)","key":"join/\(i).bin","source":"\(source.absoluteString)"}
                        """)
                })
                func completed(by worker: String) async throws -> Int {
                    try await env.statuses().filter { $0.worker == worker && $0.state == .completed }.count
                }
                #expect(try await eventually(timeout: 90, every: 0.5) { try await completed(by: "first") > 0 },
                        "the first worker never completed a transfer:\n\(first.log.suffix(3000))")

                // Timed on the worker's own clock, from its first log line to its
                // first completed upload: the status topic and this process can
                // lag by many seconds when the whole suite shares two cores.
                // Without the short session timeout the join alone takes 2 × 44 s.
                let second = try env.startWorker(name: "second", stateDir: "state-second", extra: slow + ["--worker-id", "second"])
                let tookWork = await eventually(timeout: 150, every: 0.5) { second.log.contains("upload completed") }
                let seconds = secondsToFirstCompletion(in: second.log)
                print("scale-out: the second worker's first completed upload came \(seconds.map { "\(Int($0)) s" } ?? "never") after its start")
                #expect(tookWork && seconds.map { $0 < 60 } == true,
                        "the second worker's first completed transfer came \(seconds.map { "\(Int($0)) s" } ?? "never") after it started:\n\(second.log.suffix(3000))")
                #expect(second.log.contains("embedded cluster: consumer groups use session.timeout.ms=6000"))
                // Neither worker stopped on the rebalance.
                #expect(first.isRunning && second.isRunning)
                _ = await second.stop()
                _ = await first.stop()
            }
        }
    }
}

/// Seconds from a worker log's first line to its first `upload completed`
/// line, by the timestamps that begin them (`2026-11-25T18:03:02+0000 …`).
private func secondsToFirstCompletion(in log: String) -> TimeInterval? {
    let lines = log.split(separator: "\n")
    let format = Date.ISO8601FormatStyle(timeZone: .gmt)
    func time(_ line: Substring?) -> Date? {
        guard let stamp = line?.split(separator: " ", maxSplits: 1).first else { return nil }
        return try? format.parse(String(stamp))
    }
    guard let start = time(lines.first(where: { time($0) != nil })),
          let done = time(lines.first(where: { $0.contains("upload completed") })) else { return nil }
    return done.timeIntervalSince(start)
}
