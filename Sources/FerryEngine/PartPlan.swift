import FerryCore

/// How an object is cut into parts: S3 allows at most 10,000 parts of 5 MiB to
/// 5 GiB (the last may be smaller), so the part size is raised when needed.
public struct PartPlan: Sendable, Hashable {
    public static let minimumPartSize: Int64 = 5 << 20
    public static let maximumPartSize: Int64 = 5 << 30
    public static let maximumParts: Int64 = 10_000

    public struct Part: Sendable, Hashable {
        /// 1-based, as S3 numbers parts.
        public var number: Int
        public var offset: Int64
        public var length: Int64
        public var range: ClosedRange<Int64> { offset...(offset + length - 1) }
    }

    public let size: Int64
    public let partSize: Int64

    /// A plan for `size` bytes with parts of about `requestedPartSize`.
    public init(size: Int64, requestedPartSize: Int64) throws(FerryError) {
        guard size <= Self.maximumPartSize * Self.maximumParts else {
            throw FerryError(.invalidRequest, "object of \(size) bytes exceeds S3's 5 TiB limit")
        }
        var partSize = max(Self.minimumPartSize, min(requestedPartSize, Self.maximumPartSize))
        let needed = (size + Self.maximumParts - 1) / Self.maximumParts
        if partSize < needed {
            // Round up to a whole MiB so parts stay aligned.
            partSize = ((needed + (1 << 20) - 1) >> 20) << 20
        }
        self.size = size
        self.partSize = partSize
    }

    /// Ranges of `partSize` for a download (no 5 MiB floor needed).
    public init(rangesOf size: Int64, partSize: Int64) {
        self.size = size
        self.partSize = max(1, partSize)
    }

    public var count: Int { size == 0 ? 1 : Int((size + partSize - 1) / partSize) }

    public var parts: [Part] {
        (0..<count).map { i in
            let offset = Int64(i) * partSize
            return Part(number: i + 1, offset: offset, length: min(partSize, size - offset))
        }
    }
}
