import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// `--max-connections` bounds the worker process, not one client: transfers
/// and the trigger that reads every uploaded object (checksum-manifest) share
/// one transport. Counted from the kernel's view of the worker's sockets.
@Suite struct ConnectionCapTests {
    let logger = Logger(label: "test.cap")

    @Test func maxConnectionsHoldsForTheWholeProcess() async throws {
        let base = try TestPaths.temporaryDirectory("cap")
        let server = try await MotoServer.start(logDirectory: base)
        defer { try? FileManager.default.removeItem(at: base) }
        let env = try EndToEndTests.Environment.oneBroker(base: base, server: server, bucket: "cap", logger: logger)
        try await Boto3(server)("create-bucket", "cap")
        let port = try #require(URLComponents(string: server.endpoint)?.port)
        let cap = 2
        let total = 30
        var messages: [(key: String, value: String)] = []
        for i in 0..<total {
            let file = env.dataRoot.appendingPathComponent("in/c-\(i).bin")
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(repeating: UInt8(i), count: i % 2 == 0 ? 11 << 20 : 200_000 + i).write(to: file)
            // Guest keys under incoming/: the checksum-manifest trigger reads each object back.
            messages.append(("cap/incoming/c-\(i).bin", """
                {"id":"cap-\(i)","op":"upload","bucket":"cap","key":"incoming/c-\(i).bin","source":"\(file.absoluteString)"}
                """))
        }
        let worker = try env.startWorker(name: "capped", stateDir: "state", extra: [
            "--max-connections", "\(cap)", "--max-transfers", "8", "--part-concurrency", "4",
            "--multipart-threshold", "8MiB", "--part-size", "5MiB", "--log-level", "info",
            // Slow enough that requests overlap for seconds, whatever the machine's load.
            "--bandwidth-limit", "24MiB"])
        try await env.kcat.produceMany(topic: "ferry.requests", messages)

        // Sample the worker's connections to S3 from a thread of its own (the
        // cooperative pool is busy on a loaded machine: a task sampler once got 42 samples).
        let sampler = SocketSampler(pid: worker.pid, port: port)
        var finished = 0
        _ = try await eventually(timeout: 240, every: 1) {
            finished = Set(try await env.statuses().filter { $0.state == .completed }.map(\.id)).count
            return finished >= 2 * total  // the uploads and their manifests
        }
        let (most, samples) = sampler.stop()
        await worker.stop()
        await server.stop()
        print("connection cap figures: --max-connections \(cap); most established connections to S3 seen: \(most) in \(samples) samples; \(finished) transfers completed")
        #expect(finished == 2 * total, "\(finished) of \(2 * total) transfers completed")
        #expect(most <= cap, "the worker held \(most) connections to S3 with --max-connections \(cap)")
        #expect(most >= 2, "the test never had concurrent requests (\(most))")
    }
}

/// Samples a process's established connections to a port every 2 ms on its own thread.
final class SocketSampler: @unchecked Sendable {
    private let lock = NSLock()
    private var most = 0, samples = 0, running = true
    private let done = DispatchSemaphore(value: 0)

    init(pid: pid_t, port: Int) {
        Thread {
            while true {
                let seen = SocketCensus.established(pid: pid, toPort: port)
                self.lock.lock()
                self.most = max(self.most, seen)
                self.samples += 1
                let go = self.running
                self.lock.unlock()
                if !go { break }
                usleep(2_000)
            }
            self.done.signal()
        }.start()
    }

    func stop() -> (most: Int, samples: Int) {
        lock.lock(); running = false; lock.unlock()
        done.wait()
        lock.lock(); defer { lock.unlock() }
        return (most, samples)
    }
}
