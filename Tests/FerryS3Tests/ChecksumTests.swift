import CFerryChecksum
import FerryCore
import FerryS3
import FerryStorage
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

    /// The CRC of A followed by B, made from A's and B's CRCs and B's length,
    /// is the CRC of the bytes themselves, for both polynomials: seeded
    /// (`FERRY_FUZZ_SEED` replays it) cuts of random bytes anywhere, empty
    /// pieces included, and pieces of zeros past 2^29 and 2^32 bytes, whose
    /// length reaches the powers a small test never uses.
    @Test func combinedPiecesEqualTheWhole() {
        let seed = FuzzReplay.seed
        print("CRC combine: FERRY_FUZZ_SEED=\(seed)")
        var rng = SeededGenerator(seed: seed)
        func crc(_ polynomial: CRC32.Polynomial, _ bytes: ArraySlice<UInt8>) -> UInt32 {
            var c = CRC32(polynomial)
            bytes.withUnsafeBytes { c.update($0) }
            return c.checksum
        }
        for polynomial in [CRC32.Polynomial.ieee, .castagnoli] {
            for round in 0..<300 {
                let bytes = (0..<Int.random(in: 0...(round < 20 ? 16 : 70_000), using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                let cut = Int.random(in: 0...bytes.count, using: &rng)
                let combined = CRC32.combine(crc(polynomial, bytes[..<cut]), crc(polynomial, bytes[cut...]),
                                             secondLength: Int64(bytes.count - cut), polynomial)
                #expect(combined == crc(polynomial, bytes[...]), "\(polynomial) round \(round): \(bytes.count) bytes cut at \(cut)")
            }
            // A, then a long run of zeros, checksummed straight through.
            let head = (0..<100).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let zeros = [UInt8](repeating: 0, count: 1 << 20)
            let length: Int64 = polynomial == .castagnoli ? (1 << 32) + 17 : (1 << 29) + 3
            var straight = CRC32(polynomial), run = CRC32(polynomial)
            head.withUnsafeBytes { straight.update($0) }
            var left = length
            while left > 0 {
                let n = Int(min(left, Int64(zeros.count)))
                zeros.withUnsafeBytes { straight.update(UnsafeRawBufferPointer(rebasing: $0[..<n])); run.update(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
                left -= Int64(n)
            }
            #expect(CRC32.combine(crc(polynomial, head[...]), run.checksum, secondLength: length, polynomial) == straight.checksum,
                    "\(polynomial): \(length) zero bytes")
        }
    }

    /// A multipart object's whole CRC from its parts' (S3's base64 values, any
    /// order of the list, the last part short): the CRC of all its bytes; none
    /// when a part has no CRC, another algorithm's, or for SHA-256.
    @Test func aWholeObjectsChecksumComesFromItsParts() {
        var rng = SeededGenerator(seed: 0x3A11)
        let sizes = [5 << 20, 5 << 20, 1_234_567]
        let parts = sizes.map { size in (0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) } }
        for algorithm in [ChecksumAlgorithm.crc32c, .crc32] {
            var whole = algorithm.makeHasher()
            var completed: [CompletedPart] = []
            for (index, bytes) in parts.enumerated() {
                var hasher = algorithm.makeHasher()
                bytes.withUnsafeBytes { hasher.update($0); whole.update($0) }
                completed.append(CompletedPart(partNumber: index + 1, eTag: "\"e\(index)\"", size: Int64(bytes.count),
                                               checksum: hasher.finish(), checksumAlgorithm: algorithm))
            }
            let expected = WholeObjectChecksum(algorithm: algorithm, value: whole.finish())
            #expect(WholeObjectChecksum.combining(completed.shuffled(using: &rng), algorithm: algorithm) == expected)
            var missing = completed
            missing[1].checksum = nil
            #expect(WholeObjectChecksum.combining(missing, algorithm: algorithm) == nil)
            #expect(WholeObjectChecksum.combining(completed, algorithm: algorithm == .crc32c ? .crc32 : .crc32c) == nil)
            var garbled = completed
            garbled[2].checksum = "not base64!"
            #expect(WholeObjectChecksum.combining(garbled, algorithm: algorithm) == nil)
        }
        #expect(ChecksumAlgorithm.sha256.combined([("AAAAAA==", 1)]) == nil)
    }

    /// Our CRC32C, CRC32 and SHA256 values equal an independent computation of
    /// the same bytes (awscrt's C CRC32C; moto's zlib CRC32 and hashlib SHA256),
    /// and moto stores and returns what an upload sent.
    @Test func uploadsCarryChecksumsThatMotoAgreesWith() async throws {
        let dir = try TestPaths.temporaryDirectory("checksums")
        try await MotoServer.start(logDirectory: dir).stopAfter { moto in
            let s3 = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: moto.endpoint), region: "us-east-1",
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
