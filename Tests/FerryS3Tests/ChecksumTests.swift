import CFerryChecksum
import FerryCore
import FerryS3
import FerryTestSupport
import Foundation
import Testing

@Suite struct ChecksumTests {
    func crc(_ polynomial: CRC32.Polynomial, _ text: String) -> UInt32 {
        var c = CRC32(polynomial)
        c.update(Array(text.utf8))
        return c.checksum
    }

    /// The standard check values ("123456789") of both polynomials.
    @Test func checkValues() {
        #expect(crc(.ieee, "123456789") == 0xCBF4_3926)
        #expect(crc(.castagnoli, "123456789") == 0xE306_9283)
        #expect(crc(.castagnoli, "") == 0)
    }

    @Test func incrementalEqualsOneShot() {
        let bytes = (0..<100_003).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        var whole = CRC32(.castagnoli)
        whole.update(bytes)
        var pieces = CRC32(.castagnoli)
        for chunk in stride(from: 0, to: bytes.count, by: 4097) { pieces.update(Array(bytes[chunk..<min(chunk + 4097, bytes.count)])) }
        #expect(whole.checksum == pieces.checksum)
    }

    /// Whatever the bytes, their length and their alignment, the CPU
    /// instruction path of CRC-32C equals the table path, in one call or in
    /// pieces (2,000 seeded cases, lengths 0–70,000, offsets 0–15).
    @Test func instructionPathEqualsTables() {
        #if arch(x86_64)
        #expect(CRC32.castagnoliInHardware, "every x86-64 CPU since 2008 has SSE 4.2")
        #endif
        var rng = SeededGenerator(seed: 0xC3C3)
        let pool = (0..<70_016).map { _ in UInt8.random(in: 0...255, using: &rng) }
        pool.withUnsafeBytes { all in
            for case_ in 0..<2_000 {
                let offset = Int.random(in: 0..<16, using: &rng)
                let length = case_ < 64 ? case_ : Int.random(in: 0...70_000, using: &rng)
                let bytes = UnsafeRawBufferPointer(rebasing: all[offset..<offset + length])
                var fast = CRC32(.castagnoli)
                let cut = Int.random(in: 0...length, using: &rng)
                fast.update(UnsafeRawBufferPointer(rebasing: bytes[0..<cut]))
                fast.update(UnsafeRawBufferPointer(rebasing: bytes[cut...]))
                let slow = ferry_crc32_update_tables(FERRY_CRC32_CASTAGNOLI, 0xFFFF_FFFF, bytes.baseAddress!, length) ^ 0xFFFF_FFFF
                #expect(fast.checksum == slow, "length \(length) offset \(offset) cut \(cut)")
            }
        }
    }

    /// Our CRC32C, CRC32 and SHA256 values equal an independent computation of
    /// the same bytes (awscrt's C CRC32C; moto's zlib CRC32 and hashlib SHA256),
    /// and moto stores and returns what an upload sent.
    @Test func uploadsCarryChecksumsThatMotoAgreesWith() async throws {
        let dir = try TestPaths.temporaryDirectory("checksums")
        try await MotoServer.start(logDirectory: dir).stopAfter { moto in
            let s3 = S3Client(.init(endpoint: try S3Endpoint(url: moto.endpoint), region: "us-east-1",
                                    credentials: .init(accessKeyId: "testing", secretAccessKey: "testing")))
            try await s3.createBucket("sums")
            let bytes = (0..<300_001).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 1) }
            for algorithm in ChecksumAlgorithm.allCases {
                let key = "obj-\(algorithm.rawValue)"
                _ = try await s3.putObject(PutObjectInput(bucket: "sums", key: key, checksum: algorithm), body: .bytes(bytes))
                let script = """
                    import base64, boto3, sys
                    from awscrt import checksums
                    from moto.s3.utils import compute_checksum
                    s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1")
                    r = s3.get_object(Bucket="sums", Key=sys.argv[2], ChecksumMode="ENABLED")
                    body = r["Body"].read()
                    print(r.get("Checksum\(algorithm.rawValue)", "missing"))
                    if "\(algorithm.rawValue)" == "CRC32C":
                        print(base64.b64encode(checksums.crc32c(body).to_bytes(4, "big")).decode())
                    else:
                        print(compute_checksum(body, "\(algorithm.rawValue)").decode())
                    """
                let lines = try await runChecked("python3", ["-c", script, moto.endpoint, key], environment: moto.clientEnvironment)
                    .split(separator: "\n").map(String.init)
                var hasher = algorithm.makeHasher()
                bytes.withUnsafeBytes { hasher.update($0) }
                let ours = hasher.finish()
                #expect(lines.first == ours, "\(algorithm): stored")
                #expect(lines.dropFirst().first == ours, "\(algorithm): moto's computation")
            }
        }
    }
}
