import CFerryChecksum
import FerryCore
import Foundation
import FerryConcurrency

/// The MD5 of files being downloaded, computed by one thread beside the
/// transfers, up to sixteen files at a time in the lanes of AVX2 (or AVX-512)
/// registers (`ferry_md5_blocks_x8`, `ferry_md5_blocks_x16`): several times
/// the speed of one file at a time, and off the transport's threads. (S4,
/// eight downloads at once: MD5 was most of the client's CPU when each
/// download hashed its own bytes.) Sixteen lanes pay when downloads that have
/// ended wait beside the ones still running: eight lanes leave the CPU
/// waiting on each step's chain, and a batch of sixteen takes 0.6–0.75 of
/// the time of two batches of eight.
///
/// A download says how far its file holds its bytes (`MD5FileStream.written`);
/// the hasher reads them back from the file (the page cache: they were just
/// written) `chunkSize` at a time, and hashes a chunk of up to sixteen files
/// at once when `batchWhen` files (or every file it has) have one waiting.
/// The cost of a batch is the same however few of its eight or sixteen lanes
/// it fills, so files wait for
/// each other, within bounds: a file `urgentBytes` behind, or one whose
/// download has ended (`finish`) and that has waited `finishWait`, is hashed
/// with whichever others have a chunk. Downloads that have asked for their
/// object but not yet heard its headers say so (`announce`): they count as
/// files to wait for, so the lanes do not run part-empty whenever every file
/// already there has a chunk while the next ones wait for the server's first
/// byte. Reading what is in the file, not what came off the network, also
/// checks the write.
public final class MD5Lanes: @unchecked Sendable {
    public static let shared = MD5Lanes()

    let chunkSize: Int
    let batchWhen: Int
    let urgentBytes: Int64
    let finishWait: Duration
    /// 16 on CPUs with AVX2, else 0 (every file hashed on its own).
    let lanes: Int

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var streams: [MD5FileStream] = []
    /// Downloads announced and not yet started (or withdrawn).
    private var announced = 0
    private var started = false
    private var batches = 0, lanesHashed = 0

    /// `chunkSize` is a multiple of 64 (MD5's block). The defaults were
    /// measured on S4 (100 × 16 MiB, eight downloads at once, each giving its
    /// slot to the next while it waits here): 2.8–3.2 files per batch when
    /// ended files went at once and four made a batch, 4.5–5.5 with eight
    /// lanes, 7.3–7.5 once announced downloads counted, 10.1 with sixteen.
    public init(chunkSize: Int = 256 << 10, batchWhen: Int = 16, urgentBytes: Int64 = 32 << 20,
                finishWait: Duration = .milliseconds(200), useVectorLanes: Bool = true) {
        precondition(chunkSize > 0 && chunkSize % 64 == 0, "MD5 chunks are whole blocks")
        self.chunkSize = chunkSize
        lanes = useVectorLanes ? Int(ferry_md5_lanes()) : 0
        // Without vector lanes there is nothing to wait for.
        self.batchWhen = lanes > 0 ? min(lanes, max(1, batchWhen)) : 1
        self.urgentBytes = max(Int64(chunkSize), urgentBytes)
        self.finishWait = max(.zero, finishWait)
    }

    /// Whether this CPU hashes eight or sixteen messages at once (AVX2).
    public static var hasVectorLanes: Bool { ferry_md5_lanes() > 0 }

    /// Batches hashed so far and the files they held: how full the lanes ran.
    public var statistics: (batches: Int, lanes: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (batches, lanesHashed)
    }

    /// Files per batch on average (16 at most; 1 is one file at a time); nil before the first batch.
    public var filesPerBatch: Double? {
        let (batches, lanes) = statistics
        return batches > 0 ? Double(lanes) / Double(batches) : nil
    }

    /// Files being hashed now.
    public var activeCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return streams.count
    }

    /// Files announced and not yet started: downloads waiting for their headers.
    public var announcedCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return announced
    }

    /// Says a download will likely `start` a file soon (its GET is sent, its
    /// headers have not come): until the announcement is used or dropped, the
    /// lanes wait for it as for a file without a chunk yet, each file's wait
    /// still bounded by `finishWait` and `urgentBytes`.
    public func announce() -> MD5Announcement {
        condition.lock()
        announced += 1
        condition.unlock()
        return MD5Announcement(lanes: self)
    }

    /// Starts hashing the file open as `descriptor` from byte 0, as its bytes
    /// are written, in place of `announcement` if one is given.
    public func start(_ descriptor: Int32, announced announcement: MD5Announcement? = nil) throws(FerryError) -> MD5FileStream {
        let stream: MD5FileStream
        do {
            stream = try MD5FileStream(lanes: self, descriptor: descriptor)
        } catch {
            announcement?.withdraw()
            throw error
        }
        condition.lock()
        announcement?.withdrawLocked()
        streams.append(stream)
        if !started {
            started = true
            ProcessThreads.start("ferry-md5") { [self] in run() }
        }
        condition.unlock()
        return stream
    }

    // MARK: - Called by the streams

    func lock() { condition.lock() }
    func unlock() { condition.unlock() }
    func signal() { condition.broadcast() }

    /// Under the lock: an announcement used or dropped.
    func withdrawAnnouncementLocked() {
        announced -= 1
        condition.broadcast()
    }

    /// Under the lock.
    func remove(_ stream: MD5FileStream) {
        streams.removeAll { $0 === stream }
    }

    // MARK: - The hasher's thread

    private func run() {
        let width = max(lanes, 1)
        let buffers = (0..<width).map { _ in UnsafeMutableRawPointer.allocate(byteCount: chunkSize, alignment: 64) }
        let chunk = Int64(chunkSize)
        condition.lock()
        while true {
            // Files whose download has ended and that have less than a chunk
            // left: their last piece is hashed here and their digest handed over.
            let done = streams.filter { $0.finishing && !$0.busy && ($0.failed || $0.available - $0.hashed < chunk) }
            if !done.isEmpty {
                streams.removeAll { stream in done.contains { $0 === stream } }
                condition.unlock()
                for stream in done { stream.complete() }
                condition.lock()
                continue
            }
            let now = ContinuousClock.now
            let waiting = streams.filter { !$0.failed && $0.available - $0.hashed >= chunk }
            let full = waiting.count >= min(batchWhen, streams.count + announced)
            let urgent = waiting.contains { $0.available - $0.hashed >= urgentBytes || ($0.finishing && $0.finishingSince + finishWait <= now) }
            guard !waiting.isEmpty, full || urgent else {
                // Asleep until a write brings a chunk, or the first ended file's wait is over.
                if let next = waiting.filter(\.finishing).map({ $0.finishingSince + finishWait }).min() {
                    _ = condition.wait(until: Date().addingTimeInterval(now.duration(to: next).inSeconds))
                } else {
                    condition.wait()
                }
                continue
            }
            // Ended files first (a download waits on them), then the most behind.
            let batch = Array(waiting.sorted {
                ($0.finishing ? 1 : 0, $0.available - $0.hashed) > ($1.finishing ? 1 : 0, $1.available - $1.hashed)
            }.prefix(width))
            for member in batch { member.busy = true }
            batches += 1
            lanesHashed += batch.count
            condition.unlock()

            var read = [Bool](repeating: false, count: batch.count)
            for (index, member) in batch.enumerated() {
                read[index] = member.readChunk(into: buffers[index], count: chunkSize)
            }
            let good = batch.indices.filter { read[$0] }
            hash(good.map { batch[$0] }, good.map { buffers[$0] })

            condition.lock()
            for (index, member) in batch.enumerated() {
                member.busy = false
                if read[index] { member.hashed += chunk } else { member.failed = true }
            }
        }
    }

    /// One chunk of each file, each file's state held by this thread alone:
    /// eight lanes for up to eight files (the cheaper call), sixteen beyond.
    private func hash(_ batch: [MD5FileStream], _ chunks: [UnsafeMutableRawPointer]) {
        let blocks = chunkSize / 64
        guard lanes > 0, batch.count > 1 else {
            for (member, chunk) in zip(batch, chunks) { ferry_md5_blocks(member.state, chunk, blocks) }
            return
        }
        let width = batch.count > 8 ? 16 : 8
        // Lanes not needed repeat the first file: the same state, the same result.
        let states: [UnsafeMutablePointer<ferry_md5_state>?] = (0..<width).map { batch[$0 < batch.count ? $0 : 0].state }
        let data: [UnsafeRawPointer?] = (0..<width).map { UnsafeRawPointer(chunks[$0 < chunks.count ? $0 : 0]) }
        if width == 16 {
            ferry_md5_blocks_x16(states, data, blocks)
        } else {
            ferry_md5_blocks_x8(states, data, blocks)
        }
    }
}

/// A download's word that it will likely start a file in the lanes (see
/// `MD5Lanes.announce`); used by `start`, or withdrawn, at most once (dropping
/// it withdraws it).
public final class MD5Announcement: @unchecked Sendable {
    private let lanes: MD5Lanes
    // Guarded by the lanes' lock.
    private var open = true

    init(lanes: MD5Lanes) { self.lanes = lanes }

    deinit { withdraw() }

    /// The download will not start a file (its object needs no MD5, or it failed).
    public func withdraw() {
        lanes.lock()
        withdrawLocked()
        lanes.unlock()
    }

    /// Under the lanes' lock.
    func withdrawLocked() {
        guard open else { return }
        open = false
        lanes.withdrawAnnouncementLocked()
    }
}

/// The MD5 of one file that a download writes from byte 0 on (see `MD5Lanes`).
/// The lanes read it through a descriptor of their own, so the download may
/// close its descriptor whenever it likes. `finish` or `discard` ends it.
public final class MD5FileStream: @unchecked Sendable {
    let lanes: MD5Lanes
    private let descriptor: Int32
    /// Written by whoever holds the stream: the hasher while `busy` or completing it.
    let state: UnsafeMutablePointer<ferry_md5_state>
    // Guarded by the lanes' lock.
    var available: Int64 = 0
    var hashed: Int64 = 0
    var busy = false
    var finishing = false
    var finishingSince = ContinuousClock.now
    var failed = false
    private var ended = false
    private var readError: String?
    private var waiter: CheckedContinuation<Result<[UInt8], FerryError>, Never>?

    init(lanes: MD5Lanes, descriptor: Int32) throws(FerryError) {
        let own = dup(descriptor)
        guard own >= 0 else { throw FerryError(.localIOError, "cannot duplicate the download's descriptor: \(String(cString: strerror(errno)))") }
        self.lanes = lanes
        self.descriptor = own
        state = .allocate(capacity: 1)
        ferry_md5_init(state)
    }

    deinit {
        close(descriptor)
        state.deallocate()
    }

    /// Bytes `0..<offset` of the file hold the download's bytes now.
    public func written(upTo offset: Int64) {
        lanes.lock()
        if offset > available && !finishing {
            // The hasher is woken only when this file gets a chunk to do, not on every write.
            let chunk = Int64(lanes.chunkSize)
            let wake = (available - hashed) < chunk && (offset - hashed) >= chunk
                || (available - hashed) < lanes.urgentBytes && (offset - hashed) >= lanes.urgentBytes
            available = offset
            if wake { lanes.signal() }
        }
        lanes.unlock()
    }

    /// The hasher's read of the next chunk (the stream is `busy`, so `hashed` holds still).
    func readChunk(into buffer: UnsafeMutableRawPointer, count: Int) -> Bool {
        do {
            try readFully(buffer, count, at: hashed)
            return true
        } catch {
            readError = error.message
            return false
        }
    }

    private func readFully(_ buffer: UnsafeMutableRawPointer, _ count: Int, at offset: Int64) throws(FerryError) {
        var done = 0
        while done < count {
            let n = pread(descriptor, buffer + done, count - done, off_t(offset + Int64(done)))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let reason = n == 0 ? "the file is shorter than the bytes written to it" : String(cString: strerror(errno))
                throw FerryError(.localIOError, "cannot read back the download to check its MD5: \(reason)")
            }
            done += n
        }
    }

    /// The MD5 of the file's first `size` bytes (all written now). Suspends,
    /// holding no thread, while the hasher takes the chunks still to do beside
    /// other files' (at most the lanes' `finishWait` for others to join, plus
    /// the hashing); the hasher hashes the last piece and resumes it.
    public func finish(size: Int64) async throws(FerryError) -> [UInt8] {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<[UInt8], FerryError>, Never>) in
            lanes.lock()
            precondition(!ended, "MD5FileStream finished twice")
            ended = true
            available = size
            finishing = true
            finishingSince = .now
            waiter = continuation
            lanes.signal()
            lanes.unlock()
        }
        return try result.get()
    }

    /// On the hasher's thread, once the stream has left the lanes with less
    /// than a chunk to do (or a failed read): the last piece, the digest, the waiter.
    func complete() {
        let result: Result<[UInt8], FerryError>
        do throws(FerryError) {
            result = .success(try lastPiece())
        } catch {
            result = .failure(error)
        }
        // Set before the stream joined the lanes' finished list, under their lock.
        waiter?.resume(returning: result)
        waiter = nil
    }

    private func lastPiece() throws(FerryError) -> [UInt8] {
        if failed { throw FerryError(.localIOError, readError ?? "cannot read back the download to check its MD5") }
        let (from, size) = (hashed, available)
        // A server that sent more bytes than the size it named: what was hashed is not this object.
        guard from <= size else {
            throw FerryError(.badDigest, "the download wrote \(from) or more bytes, the object's size is \(size)")
        }
        let rest = Int(size - from)
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: max(rest, 1), alignment: 64)
        defer { buffer.deallocate() }
        try readFully(buffer, rest, at: from)
        ferry_md5_blocks(state, buffer, rest / 64)
        var digest = [UInt8](repeating: 0, count: 16)
        digest.withUnsafeMutableBufferPointer {
            ferry_md5_finish(state, buffer + (rest - rest % 64), rest % 64, UInt64(size), $0.baseAddress)
        }
        return digest
    }

    /// Ends the stream without a digest (its download attempt failed). The
    /// hasher may still be reading a chunk; it lets go of the stream after that.
    public func discard() {
        lanes.lock()
        if !ended {
            ended = true
            lanes.remove(self)
            lanes.signal()
        }
        lanes.unlock()
    }
}
