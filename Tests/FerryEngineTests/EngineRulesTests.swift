import FerryCore
import FerryEngine
import FerryS3
import FerryLocalStore
import FerryStorage
import FerryTestSupport
import Foundation
import Logging
import Testing

@Suite struct EngineRulesTests {
    func engine(_ root: URL) throws -> TransferEngine {
        TransferEngine(store: try LocalObjectStore(root: root.appendingPathComponent(".store")), dataRoot: try DataRoot(root.path),
                       logger: Logger(label: "test.rules"))
    }

    @Test func accelerateNeedsAnAWSEndpoint() async throws {
        let root = try TestPaths.temporaryDirectory("rules")
        defer { try? FileManager.default.removeItem(at: root) }
        let request = TransferRequest(id: "acc", op: .delete, bucket: "b", key: "k", options: TransferOptions(accelerate: true))
        do {
            _ = try await engine(root).run(TransferJob(request: request, objectKey: "k"))
            Issue.record("accelerate accepted without an accelerated endpoint")
        } catch let error as FerryError {
            #expect(error.code == .invalidRequest)
            #expect(error.message.contains("accelerate"))
        }
    }

    @Test(arguments: [
        (TransferOptions(partSizeBytes: 1 << 20), "partSizeBytes"),
        (TransferOptions(partConcurrency: 0), "partConcurrency"),
        (TransferOptions(retryLimit: -1), "retryLimit"),
        (TransferOptions(timeoutSeconds: 0), "timeoutSeconds"),
        (TransferOptions(checksumAlgorithm: "MD4"), "checksumAlgorithm"),
    ])
    func badOptionsAreRefusedBeforeAnyByteMoves(options: TransferOptions, field: String) async throws {
        let root = try TestPaths.temporaryDirectory("rules")
        defer { try? FileManager.default.removeItem(at: root) }
        let request = TransferRequest(id: "opt", op: .delete, bucket: "b", key: "k", options: options)
        do {
            _ = try await engine(root).run(TransferJob(request: request, objectKey: "k"))
            Issue.record("\(field) accepted")
        } catch let error as FerryError {
            #expect(error.code == .invalidRequest)
            #expect(error.message.contains(field))
        }
    }

    @Test func partPlansRespectS3Limits() throws {
        let plan = try PartPlan(size: 37 * (1 << 20) + 123, requestedPartSize: 8 << 20)
        #expect(plan.count == 5)
        let lastLength: Int64? = plan.parts.last?.length
        #expect(lastLength == Int64(5 * 1_048_576 + 123))
        // 1 TiB with 8 MiB parts would need 131,072 parts: the part size grows to fit 10,000.
        let huge = try PartPlan(size: 1 << 40, requestedPartSize: 8 << 20)
        #expect(huge.count <= 10_000)
        #expect(huge.partSize % (1 << 20) == 0)
        #expect(try PartPlan(size: 100, requestedPartSize: 1).partSize == 5 << 20)
        #expect(throws: FerryError.self) { try PartPlan(size: (5 << 30) * 10_001, requestedPartSize: 5 << 30) }
    }
}

/// Uploading 1 GiB with 8 MiB parts and concurrency 5 must stay below 128 MiB
/// resident: parts are read by position and streamed, never held whole.
@Suite(.serialized) struct MemoryTests {
    @Test func uploadOfOneGiBStaysSmall() async throws {
        let root = try TestPaths.temporaryDirectory("memory")
        defer { try? FileManager.default.removeItem(at: root) }
        let server: any S3TestServer = CephGateway.isInstalled ? try await CephGateway.start()
                                                               : try await MotoServer.start(logDirectory: root)
        do {
            try await Boto3(server)("create-bucket", "memory")
            let file = root.appendingPathComponent("one-gib.bin")
            let fd = open(file.path, O_WRONLY | O_CREAT, 0o644)
            var chunk = [UInt8](repeating: 0, count: 1 << 20)
            for i in 0..<1024 {
                for j in stride(from: 0, to: chunk.count, by: 4096) { chunk[j] = UInt8(truncatingIfNeeded: i &+ j) }
                _ = chunk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            }
            close(fd)
            let cp = try BackgroundProcess(name: "cp", executable: TestPaths.ferryBinary,
                                           arguments: ["cp", file.path, "s3://memory/one-gib.bin", "--part-size", "8MiB",
                                                       "--part-concurrency", "5", "--quiet"],
                                           environment: server.clientEnvironment, logDirectory: root)
            var peakKiB = 0
            while cp.isRunning {
                if let status = try? String(contentsOfFile: "/proc/\(cp.pid)/status", encoding: .utf8),
                   let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
                   let kib = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") {
                    peakKiB = max(peakKiB, kib)
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            let status = await cp.stop()
            #expect(status == 0, "ferry cp failed: \(cp.log)")
            print("memory: ferry cp of 1 GiB (8 MiB parts, concurrency 5) to \(server.name): peak RSS \(peakKiB / 1024) MiB; \(cp.log.trimmingCharacters(in: .whitespacesAndNewlines))")
            #expect(peakKiB > 0)
            // Under ThreadSanitizer (scripts/tsan.sh) the binary carries shadow memory several times its own: the
            // bound means nothing there, and the test runs for its races only.
            if ProcessInfo.processInfo.environment["FERRY_TEST_SANITIZER"] == nil {
                #expect(peakKiB < 128 * 1024)
            }
            let head = try await Boto3(server)("head", "memory", "one-gib.bin")
            #expect(head.contains("1073741824"))
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }
}
