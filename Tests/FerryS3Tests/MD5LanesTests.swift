import CFerryChecksum
import FerryCore
import FerryS3
import FerryStorage
import FerryTestSupport
import Foundation
import Testing
import FerryConcurrency

/// `MD5Lanes` gives libcrypto's MD5 of every file, however the file's bytes
/// are written and announced and however files interleave, with the vector
/// lanes and without; files written by many threads at once share the lanes;
/// a stream that ends without a digest lets go of its file; a file that lost
/// bytes it was said to hold fails, never yields a digest.
@Suite struct MD5LanesTests {
    /// A temp file that removes itself.
    final class TempFile: Sendable {
        let path: String
        let fd: Int32
        init() {
            path = NSTemporaryDirectory() + "md5lanes-\(UUID().uuidString)"
            fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
            precondition(fd >= 0)
        }
        func write(_ bytes: ArraySlice<UInt8>, at offset: Int) {
            let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
            precondition(n == bytes.count)
        }
        deinit { close(fd); unlink(path) }
    }

    func bytes(_ count: Int, _ rng: inout SeededGenerator) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < count {
                var word = rng.next()
                let n = min(8, count - offset)
                withUnsafeBytes(of: &word) { raw.baseAddress!.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: n) }
                offset += n
            }
        }
        return out
    }

    func digest(of message: [UInt8], lanes: MD5Lanes) async throws -> [UInt8] {
        let file = TempFile()
        file.write(message[...], at: 0)
        let stream = try lanes.start(file.fd)
        stream.written(upTo: Int64(message.count))
        return try await stream.finish(size: Int64(message.count))
    }

    /// Each set of vector instructions this CPU has (AVX2, AVX-512), in each
    /// width (eight lanes, sixteen), advances its messages exactly as the
    /// scalar steps advance each one: generated rounds (seeded;
    /// `FERRY_FUZZ_SEED` replays them) of 1–40 blocks from drawn chaining
    /// values, with some lanes repeating another lane's state and data as a
    /// batch of fewer files than lanes does (a repeated state must advance
    /// once, not once per lane). Only the sets this CPU has are cases
    /// (machines differ: one of these hosts has AVX-512, another not), and
    /// the scalar fallback is a case too; the set in use is printed.
    @Test(arguments: [Int32(FERRY_MD5_SCALAR), Int32(FERRY_MD5_AVX2), Int32(FERRY_MD5_AVX512)].filter { ferry_md5_vector() >= $0 },
          [8, 16])
    func vectorStepsMatchTheScalarSteps(vector: Int32, width: Int) throws {
        let seed = FuzzReplay.seed
        print("MD5 vector \(vector), \(width) lanes: FERRY_FUZZ_SEED=\(seed)")
        var rng = SeededGenerator(seed: seed)
        for round in 0..<200 {
            let blocks = Int.random(in: 1...40, using: &rng)
            let distinct = Int.random(in: 1...width, using: &rng)
            let messages = (0..<distinct).map { _ in bytes(blocks * 64, &rng) }
            let starts = (0..<distinct).map { _ in
                round % 4 == 0 ? ferry_md5_state(h: (0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476))
                    : ferry_md5_state(h: (UInt32.random(in: 0...UInt32.max, using: &rng), UInt32.random(in: 0...UInt32.max, using: &rng),
                                          UInt32.random(in: 0...UInt32.max, using: &rng), UInt32.random(in: 0...UInt32.max, using: &rng)))
            }
            // Lane i holds message owner[i]; every message has a lane.
            let owner = (0..<width).map { $0 < distinct ? $0 : Int.random(in: 0..<distinct, using: &rng) }.shuffled(using: &rng)
            let vectorStates = UnsafeMutablePointer<ferry_md5_state>.allocate(capacity: distinct)
            defer { vectorStates.deallocate() }
            vectorStates.initialize(from: starts, count: distinct)
            var expected = starts
            for index in 0..<distinct {
                messages[index].withUnsafeBytes { ferry_md5_blocks(&expected[index], $0.baseAddress, blocks) }
            }
            let buffers = messages.map { message in
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: message.count, alignment: 1)
                buffer.copyBytes(from: message)
                return buffer
            }
            defer { buffers.forEach { $0.deallocate() } }
            var statePointers: [UnsafeMutablePointer<ferry_md5_state>?] = owner.map { vectorStates + $0 }
            var dataPointers: [UnsafeRawPointer?] = owner.map { UnsafeRawPointer(buffers[$0].baseAddress) }
            statePointers.withUnsafeMutableBufferPointer { states in
                dataPointers.withUnsafeMutableBufferPointer { data in
                    if width == 16 {
                        ferry_md5_blocks_x16_with(vector, states.baseAddress, data.baseAddress, blocks)
                    } else {
                        ferry_md5_blocks_x8_with(vector, states.baseAddress, data.baseAddress, blocks)
                    }
                }
            }
            for index in 0..<distinct {
                let got = vectorStates[index].h, want = expected[index].h
                #expect(got == want, "round \(round): message \(index) of \(distinct), \(blocks) blocks, lanes \(owner)")
            }
        }
    }

    /// RFC 1321's test suite, and lengths around the padding's and chunks' edges.
    @Test(arguments: [true, false])
    func knownAnswers(vectorLanes: Bool) async throws {
        let lanes = MD5Lanes(chunkSize: 128, useVectorLanes: vectorLanes)
        let suite = [
            ("", "d41d8cd98f00b204e9800998ecf8427e"),
            ("a", "0cc175b9c0f1b6a831c399e269772661"),
            ("abc", "900150983cd24fb0d6963f7d28e17f72"),
            ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
            ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"),
            (String(repeating: "1234567890", count: 8), "57edf4a22be3c955ac49da2e2107b67a"),
        ]
        for (text, expected) in suite {
            #expect(try await digest(of: Array(text.utf8), lanes: lanes).hexString == expected, "\(text)")
        }
        for length in [55, 56, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1000] {
            let message = [UInt8](repeating: 0x61, count: length)
            #expect(try await digest(of: message, lanes: lanes) == Digest.md5(message), "length \(length)")
        }
    }

    /// Seeded: 24 files of 0–600 KiB written in pieces of 1 byte to 40 KiB,
    /// the files taking turns at random, each piece announced once written
    /// (or, for some files, nothing announced until `finish`, as a store that
    /// copies locally); chunk sizes from one block up, batch and urgency
    /// settings drawn too, so batches of every width run; the files end one
    /// after another, each waiting up to a drawn `finishWait` for company.
    @Test(arguments: [true, false])
    func interleavedFilesMatchLibcrypto(vectorLanes: Bool) async throws {
        var rng = SeededGenerator(seed: vectorLanes ? 0x3D5_1A7E : 0x5CA1A7)
        for chunkSize in [64, 4096, 64 << 10] {
            let lanes = MD5Lanes(chunkSize: chunkSize, batchWhen: Int.random(in: 1...16, using: &rng),
                                 urgentBytes: Int64.random(in: 1...(256 << 10), using: &rng),
                                 finishWait: .milliseconds(Int.random(in: 0...40, using: &rng)), useVectorLanes: vectorLanes)
            let messages = (0..<24).map { _ in bytes(Int.random(in: 0...(600 << 10), using: &rng), &rng) }
            let files = messages.map { _ in TempFile() }
            let announced = messages.map { _ in Int.random(in: 0..<6, using: &rng) > 0 }
            let streams = try files.map { try lanes.start($0.fd) }
            var written = [Int](repeating: 0, count: messages.count)
            while let index = (0..<messages.count).filter({ written[$0] < messages[$0].count }).randomElement(using: &rng) {
                let n = min(messages[index].count - written[index], Int.random(in: 1...(40 << 10), using: &rng))
                files[index].write(messages[index][written[index]..<(written[index] + n)], at: written[index])
                written[index] += n
                if announced[index] { streams[index].written(upTo: Int64(written[index])) }
            }
            await Task.yield()
            for (index, stream) in streams.enumerated() {
                #expect(try await stream.finish(size: Int64(messages[index].count)) == Digest.md5(messages[index]),
                        "chunk \(chunkSize), file \(index) of \(messages[index].count) bytes")
            }
            #expect(lanes.activeCount == 0)
            if vectorLanes && MD5Lanes.hasVectorLanes {
                let stats = lanes.statistics
                #expect(stats.lanes > stats.batches, "batches held one file each: \(stats)")
            }
        }
    }

    /// Eight threads write eight files at once (as the transport's threads
    /// write downloads): every digest is right and the lanes were shared.
    @Test func threadsWritingAtOnce() async {
        let lanes = MD5Lanes(chunkSize: 4096, finishWait: .milliseconds(20))
        let results = await withTaskGroup(of: Bool.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var rng = SeededGenerator(seed: UInt64(worker) + 77)
                    var ok = true
                    for _ in 0..<6 {
                        let message = bytes(Int.random(in: 0...(400 << 10), using: &rng), &rng)
                        let pieces = (0..<(message.count / 4500 + 1)).map { _ in Int.random(in: 1...9000, using: &rng) }
                        let file = TempFile()
                        guard let stream = try? lanes.start(file.fd) else { return false }
                        // Written on the blocking pool's threads, as the transport's threads write downloads.
                        await BlockingPool.shared.run {
                            var offset = 0, piece = 0
                            while offset < message.count {
                                let n = min(message.count - offset, pieces[piece % pieces.count])
                                file.write(message[offset..<(offset + n)], at: offset)
                                offset += n
                                piece += 1
                                stream.written(upTo: Int64(offset))
                            }
                        }
                        let got = try? await stream.finish(size: Int64(message.count))
                        ok = ok && got == Digest.md5(message)
                    }
                    return ok
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results == Array(repeating: true, count: 8))
        #expect(lanes.activeCount == 0)
    }

    /// Files each with their chunks waiting, ending at once: every batch holds
    /// every file, up to the sixteen lanes (a batch costs the same however few
    /// of its lanes it fills), and each file's digest is right whichever
    /// kernel (eight lanes, sixteen) took it.
    @Test(.enabled(if: MD5Lanes.hasVectorLanes), arguments: [8, 12, 16])
    func filesWaitForEachOtherToFillTheLanes(count: Int) async throws {
        var rng = SeededGenerator(seed: 0xF111 + UInt64(count))
        let lanes = MD5Lanes(chunkSize: 4096, urgentBytes: 1 << 30, finishWait: .seconds(30))
        let messages = (0..<count).map { _ in bytes(64 * 4096, &rng) }
        let files = messages.map { _ in TempFile() }
        let streams = try files.map { try lanes.start($0.fd) }
        for (index, message) in messages.enumerated() {
            files[index].write(message[...], at: 0)
            streams[index].written(upTo: Int64(message.count))
        }
        let digests = try await withThrowingTaskGroup(of: (Int, [UInt8]).self) { group in
            for (index, stream) in streams.enumerated() {
                group.addTask { (index, try await stream.finish(size: 64 * 4096)) }
            }
            return try await group.reduce(into: [Int: [UInt8]]()) { $0[$1.0] = $1.1 }
        }
        #expect((0..<count).map { digests[$0] } == messages.map { Digest.md5($0) })
        #expect(lanes.statistics == (batches: 64, lanes: 64 * count))
    }

    /// A file whose download has ended waits for company at most `finishWait`:
    /// beside a file that gets no more bytes, its digest comes once that wait
    /// is over; alone, it waits for no one.
    @Test(.enabled(if: MD5Lanes.hasVectorLanes))
    func anEndedFileWaitsForCompanyAtMostFinishWait() async throws {
        var rng = SeededGenerator(seed: 0xE4D)
        let message = bytes(1 << 20, &rng)
        let clock = ContinuousClock()

        let lanes = MD5Lanes(chunkSize: 4096, urgentBytes: 1 << 30, finishWait: .milliseconds(300))
        let file = TempFile(), stalled = TempFile()
        file.write(message[...], at: 0)
        let stream = try lanes.start(file.fd), other = try lanes.start(stalled.fd)
        stream.written(upTo: Int64(message.count))
        var started = clock.now
        #expect(try await stream.finish(size: Int64(message.count)) == Digest.md5(message))
        let waited = started.duration(to: clock.now)
        #expect(waited >= .milliseconds(300), "hashed before its wait for company was over: \(waited)")
        #expect(waited < .seconds(30), "the wait is bounded: \(waited)")
        #expect(lanes.activeCount == 1)
        other.discard()
        #expect(lanes.activeCount == 0)

        let alone = MD5Lanes(chunkSize: 4096, urgentBytes: 1 << 30, finishWait: .seconds(60))
        let lone = try alone.start(file.fd)
        lone.written(upTo: Int64(message.count))
        started = clock.now
        #expect(try await lone.finish(size: Int64(message.count)) == Digest.md5(message))
        #expect(started.duration(to: clock.now) < .seconds(30), "a file alone waited for company")
    }

    /// A download that has sent its GET and not yet heard its headers is
    /// announced, and the lanes wait for it as for a file without a chunk: an
    /// ended file is not hashed alone while another is announced, but with it
    /// once it starts (both lanes of every batch filled); a withdrawn or
    /// dropped announcement is waited for no more; and an announcement never
    /// used holds an ended file back at most `finishWait`.
    @Test(.enabled(if: MD5Lanes.hasVectorLanes))
    func announcedDownloadsAreWaitedFor() async throws {
        var rng = SeededGenerator(seed: 0xA11)
        let a = bytes(16 * 4096, &rng), b = bytes(16 * 4096, &rng)
        let clock = ContinuousClock()

        let lanes = MD5Lanes(chunkSize: 4096, urgentBytes: 1 << 30, finishWait: .seconds(60))
        let fileA = TempFile(), fileB = TempFile()
        fileA.write(a[...], at: 0)
        let streamA = try lanes.start(fileA.fd)
        let announcement = lanes.announce()
        #expect(lanes.announcedCount == 1)
        streamA.written(upTo: Int64(a.count))
        let digestA = Task { try await streamA.finish(size: Int64(a.count)) }
        try await Task.sleep(for: .milliseconds(300))
        #expect(lanes.statistics.batches == 0, "an ended file was hashed alone while another was announced")
        fileB.write(b[...], at: 0)
        let streamB = try lanes.start(fileB.fd, announced: announcement)
        #expect(lanes.announcedCount == 0)
        streamB.written(upTo: Int64(b.count))
        #expect(try await streamB.finish(size: Int64(b.count)) == Digest.md5(b))
        #expect(try await digestA.value == Digest.md5(a))
        #expect(lanes.statistics == (batches: 16, lanes: 32))
        announcement.withdraw()  // used already: changes nothing
        #expect(lanes.announcedCount == 0)

        // Withdrawn, or dropped: the ended file goes at once.
        for drop in [false, true] {
            let waiting = MD5Lanes(chunkSize: 4096, urgentBytes: 1 << 30, finishWait: .seconds(60))
            var pending: MD5Announcement? = waiting.announce()
            let stream = try waiting.start(fileA.fd)
            stream.written(upTo: Int64(a.count))
            let digest = Task { try await stream.finish(size: Int64(a.count)) }
            try await Task.sleep(for: .milliseconds(100))
            let started = clock.now
            if drop { pending = nil } else { pending?.withdraw() }
            #expect(pending == nil || waiting.announcedCount == 0)
            #expect(try await digest.value == Digest.md5(a))
            #expect(started.duration(to: clock.now) < .seconds(30), "waited for a withdrawn announcement (dropped: \(drop))")
            #expect(waiting.announcedCount == 0)
        }

        // Never used: the wait is still bounded by finishWait.
        let bounded = MD5Lanes(chunkSize: 4096, urgentBytes: 1 << 30, finishWait: .milliseconds(300))
        let forgotten = bounded.announce()
        let stream = try bounded.start(fileA.fd)
        stream.written(upTo: Int64(a.count))
        let started = clock.now
        #expect(try await stream.finish(size: Int64(a.count)) == Digest.md5(a))
        let waited = started.duration(to: clock.now)
        #expect(waited >= .milliseconds(300) && waited < .seconds(30), "\(waited)")
        forgotten.withdraw()
    }

    /// Generated downloads (seeded; `FERRY_FUZZ_SEED` replays a run,
    /// `FERRY_FUZZ_MESSAGES` sets how many), eight at a time as eight transfer
    /// slots run them, each ending one of the ways a download can: checked,
    /// its headers naming no MD5 (withdrawn), its attempt failing before the
    /// headers (dropped) or after its stream started (discarded), each after
    /// a drawn wait for its first byte. Whatever the mix and interleaving,
    /// every checked file gets libcrypto's digest, the run ends (no file
    /// waits for an announcement that will never be used, beyond its bound),
    /// and the lanes hold no announcement and no file afterwards.
    @Test func generatedDownloadEndingsLeaveNothingBehind() async throws {
        enum Ending: CaseIterable { case checked, withdrawn, dropped, discarded }
        let seed = FuzzReplay.seed
        let count = FuzzReplay.messages(default: 160)
        print("MD5 lanes, generated download endings: seed \(seed), \(count) downloads")
        let lanes = MD5Lanes(chunkSize: 4096, urgentBytes: 64 << 10, finishWait: .milliseconds(20))
        let started = ContinuousClock.now
        let failures = await withTaskGroup(of: [String].self) { group in
            for slot in 0..<8 {
                group.addTask {
                    var rng = SeededGenerator(seed: seed &+ UInt64(slot))
                    var failures: [String] = []
                    for download in stride(from: slot, to: count, by: 8) {
                        let ending = Ending.allCases.randomElement(using: &rng)!
                        let message = bytes(Int.random(in: 0...(96 << 10), using: &rng), &rng)
                        let piece = Int.random(in: 1...20_000, using: &rng)
                        let firstByte = Int.random(in: 0...15, using: &rng)
                        let file = TempFile()
                        var announcement: MD5Announcement? = lanes.announce()
                        try? await Task.sleep(for: .milliseconds(firstByte))
                        switch ending {
                        case .withdrawn: announcement?.withdraw(); continue
                        case .dropped: announcement = nil; continue
                        case .checked, .discarded: break
                        }
                        guard let stream = try? lanes.start(file.fd, announced: announcement) else {
                            failures.append("download \(download): the lanes refused the file")
                            continue
                        }
                        let upTo = ending == .discarded ? message.count / 2 : message.count
                        await BlockingPool.shared.run {
                            var offset = 0
                            while offset < upTo {
                                let n = min(upTo - offset, piece)
                                file.write(message[offset..<(offset + n)], at: offset)
                                offset += n
                                stream.written(upTo: Int64(offset))
                            }
                        }
                        if ending == .discarded {
                            stream.discard()
                            continue
                        }
                        let got = try? await stream.finish(size: Int64(message.count))
                        if got != Digest.md5(message) { failures.append("download \(download) (\(message.count) bytes): wrong digest") }
                        _ = announcement  // held until its download ended, as a download's digest holds it
                    }
                    return failures
                }
            }
            return await group.reduce(into: [String]()) { $0 += $1 }
        }
        #expect(failures.isEmpty, "seed \(seed): \(failures.prefix(5))")
        #expect(lanes.announcedCount == 0, "seed \(seed): announcements left")
        #expect(lanes.activeCount == 0, "seed \(seed): files left in the lanes")
        let took = started.duration(to: .now)
        #expect(took < .seconds(120), "seed \(seed): \(took)")
        print("MD5 lanes, generated download endings: \(count) downloads in \(took), \(lanes.filesPerBatch.map { String(format: "%.2f", $0) } ?? "no") files per batch")
    }

    /// A stream discarded with bytes waiting (a failed download attempt) lets
    /// go of its file, and the others' digests still come.
    @Test func discardedStreamsLetGo() async throws {
        var rng = SeededGenerator(seed: 0xD15C)
        let lanes = MD5Lanes(chunkSize: 256, batchWhen: 8, urgentBytes: 1 << 30)
        let kept = TempFile(), dropped = TempFile()
        let a = bytes(10_000, &rng), b = bytes(10_000, &rng)
        kept.write(a[...], at: 0)
        dropped.write(b[...], at: 0)
        let keptStream = try lanes.start(kept.fd), droppedStream = try lanes.start(dropped.fd)
        keptStream.written(upTo: 10_000)
        droppedStream.written(upTo: 10_000)
        droppedStream.discard()
        #expect(lanes.activeCount == 1)
        #expect(try await keptStream.finish(size: 10_000) == Digest.md5(a))
        #expect(lanes.activeCount == 0)
    }

    /// A file cut short after its bytes were announced cannot be read back:
    /// the digest fails with a local I/O error instead of hashing less.
    @Test func aFileThatLostItsBytesFails() async throws {
        var rng = SeededGenerator(seed: 0xC07)
        let lanes = MD5Lanes(chunkSize: 4096)
        let file = TempFile()
        file.write(bytes(100_000, &rng)[...], at: 0)
        let stream = try lanes.start(file.fd)
        #expect(ftruncate(file.fd, 30_000) == 0)
        stream.written(upTo: 100_000)
        await #expect(throws: FerryError.self) { try await stream.finish(size: 100_000) }
        #expect(lanes.activeCount == 0)
    }

    /// More bytes written than the size finally named (a server whose body is longer
    /// than its Content-Range total): the digest fails as a mismatch, with no
    /// negative length reaching the C code.
    @Test func moreBytesThanTheSizeFailsAsAMismatch() async throws {
        var rng = SeededGenerator(seed: 0x5175)
        let lanes = MD5Lanes(chunkSize: 4096)
        let file = TempFile()
        file.write(bytes(100_000, &rng)[...], at: 0)
        let stream = try lanes.start(file.fd)
        stream.written(upTo: 100_000)
        // One stream is a batch of its own: wait until the hasher has passed byte 10,000.
        let deadline = Date().addingTimeInterval(60)
        while lanes.statistics.batches < 3 && Date() < deadline { try await Task.sleep(for: .milliseconds(1)) }
        #expect(lanes.statistics.batches >= 3)
        await #expect { try await stream.finish(size: 10_000) } throws: { ($0 as? FerryError)?.code == .badDigest }
        #expect(lanes.activeCount == 0)
    }
}
