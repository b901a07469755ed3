import FerryCore
import FerryEngine
import FerryS3
import FerryTestSupport
import Foundation
import Logging
import Testing

/// SSE-C objects through the engine against Ceph's gateway over TLS (it
/// refuses SSE-C over plain HTTP, and a HEAD of an SSE-C object without its
/// key is 400): the HEAD before an overwrite and before a delete carries the
/// key, so such an object can be written again, read and deleted.
@Suite struct CustomerKeyTests {
    @Test(.enabled(if: CephGateway.isInstalled || ProcessInfo.processInfo.environment["CI"] != nil))
    func anSSECObjectCanBeOverwrittenReadAndDeleted() async throws {
        let rgw = try await CephGateway.start(https: true)
        do {
            let root = try TestPaths.temporaryDirectory("ssec")
            defer { try? FileManager.default.removeItem(at: root) }
            let https = try #require(rgw.httpsEndpoint)
            let store = S3Client(.init(endpoint: try S3Endpoint(url: https), region: "us-east-1",
                                       credentials: .init(accessKeyId: rgw.accessKeyId, secretAccessKey: rgw.secretAccessKey),
                                       caBundle: rgw.caBundle))
            try await store.createBucket("ssec")
            let engine = TransferEngine(store: store, dataRoot: try DataRoot(root.path), logger: Logger(label: "test.ssec"))
            let key = Data((0..<32).map { UInt8($0 &* 7 &+ 1) })
            let sse = ["x-amz-server-side-encryption-customer-algorithm": "AES256",
                       "x-amz-server-side-encryption-customer-key": key.base64EncodedString(),
                       "x-amz-server-side-encryption-customer-key-md5": Data(Digest.md5(Array(key))).base64EncodedString()]
            func upload(_ id: String, _ bytes: Data) async throws {
                let file = root.appendingPathComponent("\(id).bin")
                try bytes.write(to: file)
                _ = try await engine.run(TransferJob(request: TransferRequest(id: id, op: .upload, bucket: "ssec", key: "doc.bin",
                                                                              source: file.absoluteString, headers: sse),
                                                     objectKey: "doc.bin"))
            }
            try await upload("first", Data(repeating: 1, count: 100_000))
            // Without the key the gateway refuses to describe the object: it really is SSE-C.
            await #expect(throws: FerryError.self) { _ = try await store.headObject(bucket: "ssec", key: "doc.bin") }
            // The overwrite's HEAD carries the key; the old image is the first upload.
            let second = Data(repeating: 2, count: 150_000)
            try await upload("second", second)
            let head = try await store.headObject(bucket: "ssec", key: "doc.bin", headers: sse)
            #expect(head?.size == Int64(second.count))
            // Read back with the key.
            let out = root.appendingPathComponent("out.bin")
            _ = try await engine.run(TransferJob(request: TransferRequest(id: "get", op: .download, bucket: "ssec", key: "doc.bin",
                                                                          destination: out.absoluteString, headers: sse),
                                                 objectKey: "doc.bin"))
            #expect(try Data(contentsOf: out) == second)
            // Delete with the key: its HEAD (the old image) works, and the object is gone.
            let deleted = try await engine.run(TransferJob(request: TransferRequest(id: "del", op: .delete, bucket: "ssec", key: "doc.bin",
                                                                                    headers: sse), objectKey: "doc.bin"))
            #expect(deleted.previous?.size == Int64(second.count))
            #expect(try await store.headObject(bucket: "ssec", key: "doc.bin", headers: sse) == nil)
        } catch {
            await rgw.stop()
            throw error
        }
        await rgw.stop()
    }
}
