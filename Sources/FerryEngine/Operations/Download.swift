import FerryCore
import FerryStorage
import Foundation
import Synchronization
import FerryConcurrency

extension TransferRun {
    /// Downloads into a hidden temp file beside the destination: a first GET
    /// (`firstSpan`) learns the size and ETag from its headers, and the other
    /// ranges start at once, in parallel with `If-Match`, written at their
    /// offsets, while the first one's body still streams. An object replaced
    /// meanwhile fails `If-Match` and the download starts over. Checksums are
    /// computed as the bytes stream: a stored CRC of the whole object from
    /// each range's own CRC, combined (a SHA-256 reads back what came in
    /// other ranges). Once every byte is in, the transfer gives its slot to the
    /// next one while its checks finish (`TransferSlot`). The temp file is
    /// fsynced (unless `syncDownloads` is off) and renamed into place, or
    /// removed. Ranges written are journaled: a run that resumes (same ETag,
    /// same part size) skips them, and a hand-off keeps the temp file for it.
    func download() async throws(FerryError) -> TransferOutcome {
        guard let destination = request.destination else { throw FerryError(.invalidRequest, "download needs a destination") }
        let path = try dataRoot.destinationPath(destination, areas: job.localAreas)
        // Everything below happens relative to the destination's directory,
        // opened without following links, so swapping a link into the path
        // mid-transfer cannot move the file outside the data root.
        let (directory, name) = try dataRoot.openParentBeneath(path, create: true)
        defer { close(directory) }
        let temp = ".\(name).ferry-\(request.id).part"
        // Not truncated: a resumed run keeps the ranges its journal lists; every
        // other range is rewritten and the file is cut to size at the end.
        let fd = try DataRoot.openRegularFile(at: directory, temp, flags: O_RDWR | O_CREAT, describedAs: "\(path) (temp file \(temp))")
        // The destination itself is replaced by rename only if it is a regular file (or absent).
        var existing = stat()
        if fstatat(directory, name, &existing, AT_SYMLINK_NOFOLLOW) == 0, (existing.st_mode & S_IFMT) != S_IFREG {
            close(fd)
            unlinkat(directory, temp, 0)
            throw FerryError(.invalidPath, "destination \(destination) exists and is \(DataRoot.fileKind(existing.st_mode)); only regular files are replaced")
        }
        var committed = false
        defer {
            close(fd)
            if !committed && !control.isHandedOff { unlinkat(directory, temp, 0) }
        }
        // Start over when the object changed (If-Match failed) or the bytes failed
        // their checksum; the latter counts against the retry limit.
        var restarts = 0, digestFailures = 0
        var attributes: ObjectAttributes
        while true {
            do {
                attributes = try await downloadOnce(into: fd)
                break
            } catch where (error.code == .preconditionFailed && restarts < 3)
                        || (error.code == .badDigest && digestFailures < settings.retryPolicy.retryLimit) {
                if error.code == .badDigest { digestFailures += 1 } else { restarts += 1 }
                logger.warning("starting the download over", metadata: ["reason": "\(error)"])
                // Bytes are fetched again: with a transfer slot, like any transfer.
                try await slot.takeBack(control)
                meter.add(-meter.value)
                guard ftruncate(fd, 0) == 0 else { throw FerryError(.localIOError, "cannot truncate \(temp)") }
            }
        }
        if settings.syncDownloads {
            let synced = await BlockingPool.shared.run { fsync(fd) == 0 ? nil : String(cString: strerror(errno)) }
            if let reason = synced { throw FerryError(.localIOError, "fsync \(temp): \(reason)") }
        }
        guard renameat(directory, temp, directory, name) == 0 else {
            throw FerryError(.localIOError, "cannot move download into place at \(destination): \(String(cString: strerror(errno)))")
        }
        committed = true
        return TransferOutcome(object: .init(bucket: request.bucket, key: job.objectKey, size: attributes.size,
                                             eTag: attributes.eTag, versionId: attributes.versionId),
                               eventName: nil, requestId: "", hostId: "", bytesTransferred: attributes.size,
                               attempts: restarts + digestFailures + 1)
    }

    private func downloadOnce(into fd: Int32) async throws(FerryError) -> ObjectAttributes {
        // Of the request's headers only SSE-C keys belong on a GET.
        let sse = (request.headers ?? [:]).filter { HeaderPolicy.isCustomerKeyHeader($0.key) }
        let checkMD5 = request.headers?.isEmpty ?? true
        let head = FirstHead()
        // The first range runs in a task of its own; its head (size, ETag) starts the
        // other ranges while its body is still arriving.
        async let firstRange = fetchFirstRange(into: fd, sse: sse, head: head, checkMD5: checkMD5, threshold: settings.multipartThreshold)
        let early = try await head.value.get()
        let size = early.size
        setTotal(size)
        try reserveSpace(fd, size: size)
        var named: WholeObjectChecksum?
        var rangeSums: RangeChecksums?
        if size > firstSpan {
            guard let eTag = early.eTag else {
                throw FerryError(.storageError, "ranged GET answered without an ETag; cannot guard against a replaced object")
            }
            if early.wholeObjectChecksum == nil { named = try await namedChecksum(eTag: eTag, sse: sse) }
            rangeSums = (early.wholeObjectChecksum ?? named)?.algorithm.polynomial.map(RangeChecksums.init)
            try await fetchOtherRanges(into: fd, size: size, eTag: eTag, sse: sse, sums: rangeSums)
        }
        let (first, digest) = try await firstRange.get()
        // A retried first range may have met a replaced object: the ranges
        // fetched with If-Match are of the version the first head named.
        guard first.eTag == early.eTag, first.size == size else {
            throw FerryError(.preconditionFailed, "object changed while its first range was fetched (ETag \(first.eTag ?? "none"), expected \(early.eTag ?? "none"))")
        }
        guard ftruncate(fd, off_t(size)) == 0 else { throw FerryError(.localIOError, "cannot size the download file") }
        // Every byte is in the file: the next transfer may use the network while
        // this one's checks finish (the MD5 waits to share the lanes with others').
        slot.stepAside()
        // What streamed through no CRC (ranges resumed from disk, a store that
        // copies without showing the bytes) is read back from the file.
        if let check = try await digest.verify(fd: fd, size: size, ranges: rangeSums, named: named) {
            logger.debug("\(check.algorithm.rawValue) of the whole object checked: \(check.rangesCombined) ranges' CRCs combined, \(check.bytesReadBack) bytes read back from the file")
        }
        report()
        return first
    }

    /// The size is the server's word: a download that cannot fit fails now, with
    /// the figures, instead of filling the disk first. The blocks are reserved at
    /// once, so the ranges write into allocated space instead of making the
    /// filesystem allocate piece by piece (where it cannot, writes allocate as before).
    private func reserveSpace(_ fd: Int32, size: Int64) throws(FerryError) {
        if let (needed, free) = FileSpace.shortfall(fd, length: size) {
            throw FerryError(.localIOError, "the object is \(size) bytes; its destination's filesystem has \(free) bytes free and the download needs \(needed) more")
        }
        FileSpace.reserve(fd, length: size)
    }

    /// The stored checksum of the whole object, which a ranged GET does not name:
    /// asked for once (a HEAD) before the other ranges start, so that each of them
    /// keeps the CRC of its own bytes as they stream and the CRCs combine into the
    /// whole's. A HEAD that fails for another reason than a changed object leaves
    /// the download without that check, as from a store that keeps none, and says so.
    private func namedChecksum(eTag: String, sse: [String: String]) async throws(FerryError) -> WholeObjectChecksum? {
        let store = self.store, location = self.location
        do {
            return try await attempt("HeadObject (checksum)") { () async throws(FerryError) -> WholeObjectChecksum? in
                try await store.wholeObjectChecksum(location, eTag: eTag, headers: sse)
            }
        } catch where error.code != .preconditionFailed && error.code != .cancelled {
            logger.warning("cannot learn the object's stored checksum (HEAD): \(error); the download goes on without that check")
            return nil
        }
    }

    /// Every range after the first span, `partConcurrency` at once, each `If-Match`
    /// the first head's ETag and written at its offset; ranges the journal holds
    /// from an earlier run of the same version are not fetched again.
    private func fetchOtherRanges(into fd: Int32, size: Int64, eTag: String, sse: [String: String],
                                  sums rangeSums: RangeChecksums?) async throws(FerryError) {
        let partSize = settings.partSize
        let firstParts = firstSpan / partSize
        let id = request.id, journal = self.journal, location = self.location, run = self
        let written = await journal?.downloadedParts(transferId: id, eTag: eTag, partSize: partSize) ?? []
        let rest = Array(PartPlan(rangesOf: size, partSize: partSize).parts.dropFirst(Int(firstParts)))
        let resumed = rest.filter { written.contains($0.number) }
        if !resumed.isEmpty {
            meter.add(resumed.reduce(0) { $0 + $1.length })
            logger.info("resuming download", metadata: ["partsOnDisk": "\(resumed.count + Int(firstParts))", "parts": "\(rest.count + Int(firstParts))"])
        }
        _ = try await forEachConcurrently(rest.filter { !written.contains($0.number) },
                                          concurrency: settings.partConcurrency) { (part) async throws(FerryError) -> Int64 in
            let got = try await run.attempt("GetObject range \(part.number)") { () async throws(FerryError) -> ObjectAttributes in
                // A fresh CRC per attempt: a failed attempt's bytes are written again.
                let sum = rangeSums.map { RangeChecksum($0.polynomial) }
                let observer = sum.map { sum in GetObjectObserver(attributes: { _ in }, body: { sum.feed($0) }) }
                let got = try await run.store.getObject(GetObjectInput(bucket: location.bucket, key: location.key, range: part.range,
                                                                       ifMatch: eTag, headers: sse, observer: observer),
                                                        into: fd, at: part.offset, progress: run.meter)
                if let sum { rangeSums?.record(sum, at: part.offset, length: part.length) }
                return got
            }
            guard got.bytesReceived == part.length else {
                throw FerryError(.storageError, "range \(part.range) returned \(got.bytesReceived) bytes")
            }
            // A store that ignores If-Match still names what it served: bytes of
            // another version must not join this one's (the download starts over).
            if let served = got.eTag, served != eTag {
                throw FerryError(.preconditionFailed, "range \(part.range) came from another version of the object "
                    + "(ETag \(TextClip.clipped(served, toUTF8: 128)), expected \(TextClip.clipped(eTag, toUTF8: 128))); "
                    + "the store did not refuse it despite If-Match")
            }
            await journal?.partDownloaded(transferId: id, eTag: eTag, partSize: partSize, partNumber: part.number)
            return got.bytesReceived
        }
    }

    /// What the first GET asks for: up to the multipart threshold when that is
    /// a whole number of parts, so an object no larger than the threshold
    /// comes in one GET, in order, hashed as it streams (as uploads below the
    /// threshold are one PUT); otherwise one part.
    var firstSpan: Int64 {
        let (threshold, partSize) = (settings.multipartThreshold, settings.partSize)
        return threshold >= partSize && threshold % partSize == 0 ? threshold : partSize
    }

    /// GETs the first span (the whole object when it is empty, which
    /// has no byte 0), hashing its bytes as they arrive; `head` hears its
    /// attributes as soon as the first attempt's headers do, or the error.
    private func fetchFirstRange(into fd: Int32, sse: [String: String], head: FirstHead, checkMD5: Bool,
                                 threshold: Int64) async -> Result<(ObjectAttributes, DownloadDigest), FerryError> {
        do {
            let got = try await fetchFirstRangeOnce(into: fd, sse: sse, head: head, checkMD5: checkMD5, threshold: threshold)
            head.deliver(.success(got.0))
            // Journaled at once: a hand-off while later ranges run keeps it.
            if got.0.size > firstSpan, let eTag = got.0.eTag {
                for part in 1...Int(firstSpan / settings.partSize) {
                    await journal?.partDownloaded(transferId: request.id, eTag: eTag, partSize: settings.partSize, partNumber: part)
                }
            }
            return .success(got)
        } catch {
            head.deliver(.failure(error))
            return .failure(error)
        }
    }

    private func fetchFirstRangeOnce(into fd: Int32, sse: [String: String], head: FirstHead, checkMD5: Bool,
                                     threshold: Int64) async throws(FerryError) -> (ObjectAttributes, DownloadDigest) {
        let location = self.location, store = self.store, meter = self.meter, firstSpan = self.firstSpan
        func get(_ range: ClosedRange<Int64>?) async throws(FerryError) -> (ObjectAttributes, DownloadDigest) {
            try await attempt("GetObject") { () async throws(FerryError) -> (ObjectAttributes, DownloadDigest) in
                // A fresh digest per attempt: a failed attempt's bytes are written again.
                let digest = DownloadDigest(file: fd, mayCheckMD5: checkMD5, firstSpan: firstSpan)
                let observer = GetObjectObserver(attributes: { attributes in
                    digest.expect(attributes, checkMD5: checkMD5 && attributes.size <= threshold)
                    head.deliver(.success(attributes))
                }, body: { digest.feed($0) })
                let attributes = try await store.getObject(GetObjectInput(bucket: location.bucket, key: location.key, range: range,
                                                                          headers: sse, checksumMode: true, observer: observer,
                                                                          maxBytes: firstSpan),
                                                           into: fd, at: 0, progress: meter)
                // Stores that set no head (none today) still get their checks.
                digest.expect(attributes, checkMD5: checkMD5 && attributes.size <= threshold)
                return (attributes, digest)
            }
        }
        do {
            return try await get(0...(firstSpan - 1))
        } catch where error.code == .invalidRange {
            // No byte 0: the object is empty. Asked for whole, it still gets at most
            // the first range's bytes (a server could otherwise fill the disk).
            return try await get(nil)
        }
    }
}

/// The first head of a download's first range (or the error that ended it),
/// awaited by the download to start the other ranges.
typealias FirstHead = OnceValue<Result<ObjectAttributes, FerryError>>

/// The checks a download's bytes must pass, computed while the first range
/// streams in: the object's full additional checksum when the server returned
/// one (not a composite of parts), and for a single-part object up to the
/// multipart threshold sent without SSE headers its MD5, which is the ETag.
/// The checksum takes the bytes as they reach the file; the MD5 is computed
/// by `MD5Lanes` beside the other downloads', read back from the file. A CRC
/// is made whole from the first range's and the later ranges' own
/// (`RangeChecksums`); only bytes that streamed through neither (ranges
/// resumed from disk, stores that copy locally) are read back from the file,
/// and for a SHA-256 every byte after the first range. A mismatch is
/// `badDigest`: the download is retried, never accepted.
///
/// Not locked: one request feeds it, on the transport's thread, one callback
/// after another; the download verifies only after that request has returned
/// (the continuation that ends the request orders the two), one step at a time.
final class DownloadDigest: @unchecked Sendable {
    private let file: Int32
    private var configured = false
    private var md5: MD5FileStream?
    /// Held from the GET until its headers say whether the MD5 is checked.
    private var announcement: MD5Announcement?
    private var expectedMD5: String?
    /// Why the MD5 cannot be computed (the lanes could not take the file).
    private var md5Unavailable: FerryError?
    private var checksum: ChecksumHasher?
    private var expectedChecksum: WholeObjectChecksum?
    /// Bytes in the file so far, from byte 0, that went through the checksum.
    private var fed: Int64 = 0
    /// The first span's length: an object larger than it comes in ranges, and
    /// its stored checksum, if any, is named only later (`named` in `verify`).
    private let firstSpan: Int64
    /// For such an object, a CRC-32C (Ferry's default, and a few milliseconds
    /// for the whole first span on the CPU's instruction) of the first span as
    /// it streams, in case the checksum named later is one.
    private var speculative: RangeChecksum?

    /// The download's file, written from byte 0. One that may check the MD5
    /// is announced to the lanes at once, so they wait for it (`MD5Lanes.announce`).
    init(file: Int32, mayCheckMD5: Bool, firstSpan: Int64) {
        self.file = file
        self.firstSpan = firstSpan
        if mayCheckMD5 { announcement = MD5Lanes.shared.announce() }
    }

    deinit {
        md5?.discard()  // a finished stream ignores it
        announcement?.withdraw()
    }

    /// Sets the expected values from the object's attributes (once).
    func expect(_ attributes: ObjectAttributes, checkMD5: Bool) {
        guard !configured else { return }
        configured = true
        let announcement = self.announcement
        self.announcement = nil
        defer { announcement?.withdraw() }  // a no-op once `start` used it
        if let stored = attributes.wholeObjectChecksum {
            expectedChecksum = stored
            checksum = stored.algorithm.makeHasher()
        } else if attributes.size > firstSpan {
            speculative = RangeChecksum(.castagnoli)
        }
        if checkMD5, let eTag = attributes.eTag, case let hex = eTag.trimmingCharacters(in: CharacterSet(charactersIn: "\"")),
           hex.count == 32, hex.allSatisfy(\.isHexDigit) {
            expectedMD5 = hex.lowercased()
            do throws(FerryError) {
                md5 = try MD5Lanes.shared.start(file, announced: announcement)
            } catch {
                md5Unavailable = error
            }
        }
    }

    /// The next bytes of the object, in order from byte 0, now in the file.
    func feed(_ bytes: UnsafeRawBufferPointer) {
        guard configured else { return }
        checksum?.update(bytes)
        speculative?.feed(bytes)
        fed += Int64(bytes.count)
        md5?.written(upTo: fed)
    }

    /// The additional checksum over the bytes after `fed`, read from the file. Blocking.
    private func checksumRest(fd: Int32, size: Int64) throws(FerryError) {
        try ObjectBody.file(descriptor: fd, offset: fed, length: size - fed).readAll { checksum?.update($0) }
        fed = size
    }

    /// What the stored checksum's check took: ranges whose CRCs were combined
    /// (the first span's included), and bytes read back from the file.
    struct ChecksumCheck {
        var algorithm: ChecksumAlgorithm
        var rangesCombined: Int
        var bytesReadBack: Int64
    }

    /// Hashes what the stream did not (reading the file on the blocking pool),
    /// waits for the MD5 from the lanes, and compares. `ranges` holds the CRCs
    /// the later ranges computed as they streamed; `named` the stored
    /// checksum a HEAD named for an object in ranges (its first GET named none).
    @discardableResult
    func verify(fd: Int32, size: Int64, ranges: RangeChecksums? = nil,
                named: WholeObjectChecksum? = nil) async throws(FerryError) -> ChecksumCheck? {
        var check: ChecksumCheck?
        if expectedChecksum == nil, let named {
            expectedChecksum = named
            checksum = named.algorithm.makeHasher()
            // What streamed went through no hasher of this algorithm: the first
            // span's CRC is the speculative CRC-32C's, or its bytes are read again.
            fed = 0
        }
        if let stored = expectedChecksum, let checksum {
            let (algorithm, expected) = (stored.algorithm, stored.value)
            let actual: String
            if let polynomial = algorithm.polynomial {
                let first: (crc: UInt32, length: Int64)
                if fed > 0, let crc = checksum.crcValue {
                    first = (crc, fed)
                } else if let speculative, polynomial == .castagnoli {
                    first = (speculative.crc.checksum, speculative.fed)
                } else {
                    first = (0, 0)  // the CRC of no bytes
                }
                let recorded = ranges?.recorded ?? []
                let whole = try await BlockingPool.shared.run { () throws(FerryError) -> RangeChecksums.Whole in
                    try RangeChecksums.whole(first: first.crc, firstLength: first.length, ranges: recorded,
                                             size: size, polynomial: polynomial, file: fd)
                }
                actual = ChecksumAlgorithm.base64(crc: whole.crc)
                check = ChecksumCheck(algorithm: algorithm, rangesCombined: whole.rangesCombined + (first.length > 0 ? 1 : 0),
                                      bytesReadBack: whole.bytesReadBack)
            } else {
                let readBack = size - fed
                if fed < size {
                    try await BlockingPool.shared.run { [self] () throws(FerryError) in try checksumRest(fd: fd, size: size) }
                }
                actual = (self.checksum ?? checksum).finish()  // `checksumRest` fed the rest into the stored hasher
                check = ChecksumCheck(algorithm: algorithm, rangesCombined: 0, bytesReadBack: max(0, readBack))
            }
            if actual != expected {
                // The expected value is the server's word: bounded in the message.
                throw FerryError(.badDigest, "downloaded bytes have \(algorithm.rawValue) \(actual), the object's is \(TextClip.clipped(expected, toUTF8: 128))")
            }
        }
        guard let expected = expectedMD5 else { return check }
        if let md5Unavailable { throw md5Unavailable }
        if let actual = try await md5?.finish(size: size).hexString, actual != expected {
            throw FerryError(.badDigest, "downloaded bytes have MD5 \(actual), the object's ETag says \(expected)")
        }
        return check
    }
}

/// The CRC of one range's bytes, fed as they reach the file. Not locked, as
/// `DownloadDigest`: one request feeds it, one callback after another, and it
/// is read once that request has returned.
final class RangeChecksum: @unchecked Sendable {
    private(set) var crc: CRC32
    private(set) var fed: Int64 = 0

    init(_ polynomial: CRC32.Polynomial) { crc = CRC32(polynomial) }

    func feed(_ bytes: UnsafeRawBufferPointer) {
        crc.update(bytes)
        fed += Int64(bytes.count)
    }
}

/// The CRCs of a download's later ranges, each computed as its bytes
/// streamed (`RangeChecksum`), by offset; combined with the first range's
/// into the whole object's (`whole`), so that no byte that streamed through a
/// CRC is read again.
final class RangeChecksums: Sendable {
    struct Range: Sendable, Equatable {
        var offset: Int64
        var length: Int64
        var crc: UInt32
    }

    let polynomial: CRC32.Polynomial
    private let ranges = Mutex<[Range]>([])

    init(_ polynomial: CRC32.Polynomial) { self.polynomial = polynomial }

    /// A range's CRC, once its request succeeded, if every byte of it went
    /// through the CRC. A store may copy without showing the bytes
    /// (`GetObjectObserver`): such a range is left for `whole` to read back.
    func record(_ sum: RangeChecksum, at offset: Int64, length: Int64) {
        guard sum.fed == length, length > 0 else { return }
        let range = Range(offset: offset, length: length, crc: sum.crc.checksum)
        ranges.withLock { $0.append(range) }
    }

    var recorded: [Range] { ranges.withLock { $0 } }

    /// The CRC of the file's first `size` bytes: the first range's CRC (of its
    /// first `firstLength` bytes), then each recorded range in order of
    /// offset, combined; the bytes of any gap between them (a range resumed
    /// from disk, one whose bytes a store did not show) are read from the
    /// file. A range that overlaps what came before is not trusted: from where
    /// it overlaps, the file is read instead. Blocking.
    static func whole(first: UInt32, firstLength: Int64, ranges: [Range], size: Int64,
                      polynomial: CRC32.Polynomial, file: Int32) throws(FerryError) -> Whole {
        var whole = Whole(crc: first, rangesCombined: 0, bytesReadBack: 0)
        var position = firstLength
        func readBack(upTo end: Int64) throws(FerryError) {
            guard end > position else { return }
            var gap = CRC32(polynomial)
            try ObjectBody.file(descriptor: file, offset: position, length: end - position).readAll { gap.update($0) }
            whole.crc = CRC32.combine(whole.crc, gap.checksum, secondLength: end - position, polynomial)
            whole.bytesReadBack += end - position
            position = end
        }
        for range in ranges.sorted(by: { $0.offset < $1.offset }) where range.offset + range.length <= size {
            guard range.offset >= position else { continue }
            try readBack(upTo: range.offset)
            whole.crc = CRC32.combine(whole.crc, range.crc, secondLength: range.length, polynomial)
            whole.rangesCombined += 1
            position = range.offset + range.length
        }
        try readBack(upTo: size)
        return whole
    }

    /// The whole's CRC, and what made it.
    struct Whole: Sendable {
        var crc: UInt32
        /// Recorded ranges combined (not counting the first span).
        var rangesCombined: Int
        var bytesReadBack: Int64
    }
}
