@testable import FerryEngine
import FerryCore
import FerryS3
import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// A download's whole CRC from its ranges' (`RangeChecksums.whole`) is the
/// CRC of the file's bytes, whichever ranges streamed through a CRC and
/// whichever did not (read back from the file), in whatever order they were
/// recorded; a range recorded over bytes another range already covered is
/// not trusted. Seeded (`FERRY_FUZZ_SEED` replays it).
@Suite struct RangeChecksumsTests {
    @Test func theWholeIsTheFilesCRCWhateverStreamed() throws {
        let seed = FuzzReplay.seed
        print("range checksums: FERRY_FUZZ_SEED=\(seed)")
        var rng = SeededGenerator(seed: seed)
        let path = NSTemporaryDirectory() + "range-checksums-\(UUID().uuidString)"
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        #expect(fd >= 0)
        defer { close(fd); unlink(path) }
        for round in 0..<120 {
            let polynomial: CRC32.Polynomial = round % 2 == 0 ? .castagnoli : .ieee
            let size = Int.random(in: 0...300_000, using: &rng)
            let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) }
            #expect(ftruncate(fd, 0) == 0)
            #expect(bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } == size)
            func crc(_ range: Range<Int>) -> UInt32 {
                var c = CRC32(polynomial)
                bytes[range].withUnsafeBytes { c.update($0) }
                return c.checksum
            }
            // The first span streamed its first `firstLength` bytes; the rest is cut into ranges.
            let firstLength = Int.random(in: 0...size, using: &rng)
            var cuts = [firstLength]
            while let last = cuts.last, last < size { cuts.append(min(size, last + Int.random(in: 1...40_000, using: &rng))) }
            var recorded: [RangeChecksums.Range] = []
            for (start, end) in zip(cuts, cuts.dropFirst()) where Bool.random(using: &rng) || round % 7 == 0 {
                recorded.append(.init(offset: Int64(start), length: Int64(end - start), crc: crc(start..<end)))
                // A range recorded over bytes this one covered (a server's answer for
                // other bytes must not count): its CRC is garbage.
                if end - start > 1, Int.random(in: 0..<4, using: &rng) == 0 {
                    let inside = Int.random(in: (start + 1)..<end, using: &rng)
                    recorded.append(.init(offset: Int64(inside), length: Int64(min(size, inside + 10) - inside), crc: 0xDEAD_BEEF))
                }
            }
            let whole = try RangeChecksums.whole(first: crc(0..<firstLength), firstLength: Int64(firstLength),
                                                 ranges: recorded.shuffled(using: &rng), size: Int64(size),
                                                 polynomial: polynomial, file: fd)
            #expect(whole.crc == crc(0..<size), "round \(round): \(size) bytes, first \(firstLength), \(recorded.count) ranges recorded")
            // Only the bytes no trusted range covered were read again.
            let covered = recorded.filter { $0.crc != 0xDEAD_BEEF }.reduce(Int64(firstLength)) { $0 + $1.length }
            #expect(whole.bytesReadBack == Int64(size) - covered, "round \(round)")
        }
    }

    /// When every byte streamed through a CRC, the file is not read at all:
    /// a descriptor that cannot be read still gives the whole's CRC.
    @Test func nothingIsReadWhenEveryRangeStreamed() throws {
        let path = NSTemporaryDirectory() + "range-checksums-\(UUID().uuidString)"
        let writeOnly = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer { close(writeOnly); unlink(path) }
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        func crc(_ range: Range<Int>) -> UInt32 {
            var c = CRC32(.castagnoli)
            bytes[range].withUnsafeBytes { c.update($0) }
            return c.checksum
        }
        let ranges = [RangeChecksums.Range(offset: 60_000, length: 40_000, crc: crc(60_000..<100_000)),
                      .init(offset: 30_000, length: 30_000, crc: crc(30_000..<60_000))]
        let whole = try RangeChecksums.whole(first: crc(0..<30_000), firstLength: 30_000, ranges: ranges, size: 100_000,
                                             polynomial: .castagnoli, file: writeOnly)
        #expect(whole.crc == crc(0..<100_000) && whole.bytesReadBack == 0 && whole.rangesCombined == 2)
        // A gap is read, and through this descriptor it cannot be: the error says so.
        #expect(throws: FerryError.self) {
            try RangeChecksums.whole(first: crc(0..<30_000), firstLength: 30_000, ranges: [ranges[0]], size: 100_000,
                                     polynomial: .castagnoli, file: writeOnly)
        }
    }

    /// A range that streamed only part of its bytes (a store that copies
    /// without showing them all) is not recorded, so its bytes are read back.
    @Test func aRangeThatDidNotStreamWhollyIsNotRecorded() {
        let sums = RangeChecksums(.castagnoli)
        let partial = RangeChecksum(.castagnoli)
        [UInt8](repeating: 7, count: 10).withUnsafeBytes { partial.feed($0) }
        sums.record(partial, at: 100, length: 20)
        #expect(sums.recorded.isEmpty)
        sums.record(partial, at: 100, length: 10)
        #expect(sums.recorded == [.init(offset: 100, length: 10, crc: partial.crc.checksum)])
    }
}
