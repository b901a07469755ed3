import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Logging
import Testing

/// A worker on a machine whose clock is an hour ahead, against Ceph's gateway,
/// which refuses signatures more than 15 minutes off as S3 does: the worker
/// learns the store's time from the first refusal and its transfers complete.
/// libfaketime moves the worker's clock. librdkafka waits on C11 condition
/// variables, whose deadlines glibc measures on the real clock and libfaketime
/// does not adjust (a worker under faketime alone never got a delivery report);
/// scripts/tsan's shim routes them to pthreads, which it does adjust.
@Suite(.serialized) struct ClockSkewWorkerTests {
    let logger = Logger(label: "test.skew-worker")

    // Not under a sanitizer: its runtime's timed waits do not go through libfaketime's, and the process hangs.
    @Test(.enabled(if: CephGateway.isInstalled || ProcessInfo.processInfo.environment["CI"] != nil),
          .enabled(if: ProcessInfo.processInfo.environment["FERRY_TEST_SANITIZER"] == nil, "libfaketime and TSan's interceptors"))
    func aWorkerWhoseClockIsAnHourAheadCompletesItsTransfers() async throws {
        try await CephGateway.start().stopAfter { rgw in
            let base = try TestPaths.temporaryDirectory("skew-worker")
            defer { try? FileManager.default.removeItem(at: base) }
            let shim = base.appendingPathComponent("c11-threads-shim.so").path
            try await runChecked("clang", ["-shared", "-fPIC", "-O2", "-o", shim,
                                           TestPaths.repositoryRoot.appendingPathComponent("scripts/tsan/c11-threads-shim.c").path, "-lpthread"])
            let env = try EndToEndTests.Environment.oneBroker(base: base, server: rgw, bucket: "skewed", logger: logger)
            try await Boto3(rgw)("create-bucket", env.bucket)
            var environment = rgw.clientEnvironment
            environment["LD_PRELOAD"] = shim
            environment["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
            let worker = try BackgroundProcess(
                name: "skewed-worker", executable: "/usr/bin/faketime",
                arguments: ["-f", "+1h", TestPaths.ferryBinary]
                    + WorkerCommandLine(bootstrapServers: env.cluster.bootstrapServers, storage: .s3(endpoint: rgw.endpoint),
                                        dataRoot: env.dataRoot, stateDirectory: base.appendingPathComponent("state")).arguments,
                environment: environment, logDirectory: base)

            // Larger than the multipart threshold: its parts are signed at once.
            let bytes = Data((0..<(20 << 20)).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 11) })
            let source = env.dataRoot.appendingPathComponent("in.bin")
            try bytes.write(to: source)
            try await env.kcat.produce(topic: "ferry.requests", key: "skewed/in.bin", value: """
                {"id":"skew-up","op":"upload","bucket":"skewed","key":"in.bin","source":"\(source.absoluteString)"}
                """)
            let up = try #require(try await env.terminalStatus(of: "skew-up", timeout: 90), "no status; worker log:\n\(worker.log)")
            #expect(up.state == .completed, "\(up.error?.message ?? "")\n\(worker.log)")

            let back = env.dataRoot.appendingPathComponent("back.bin")
            try await env.kcat.produce(topic: "ferry.requests", key: "skewed/in.bin", value: """
                {"id":"skew-down","op":"download","bucket":"skewed","key":"in.bin","destination":"\(back.absoluteString)"}
                """)
            let down = try #require(try await env.terminalStatus(of: "skew-down", timeout: 60), "no status; worker log:\n\(worker.log)")
            #expect(down.state == .completed, "\(down.error?.message ?? "")\n\(worker.log)")
            #expect(try Data(contentsOf: back) == bytes)

            let warnings = worker.log.components(separatedBy: "\n").filter { $0.contains("refused a request as signed too far from its time") }
            #expect(warnings.count == 1, "\(worker.log)")
            #expect(["3599", "3600", "3601"].contains { warnings.first?.contains("this machine's clock is \($0) s ahead of the store's") == true },
                    "\(warnings)")
            // faketime runs the worker as its child and does not pass a signal on: the whole group goes.
            kill(-worker.pid, SIGKILL)
            _ = await worker.stop()
        }
    }
}
