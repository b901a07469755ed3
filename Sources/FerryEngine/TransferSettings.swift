import FerryCore
import FerryStorage

/// The engine's defaults, and the settings of one transfer after its
/// request's `options` are applied (see docs/producers/requests.md).
public struct TransferSettings: Sendable, Hashable {
    /// Uploads larger than this use multipart; downloads larger than one part use ranges.
    public var multipartThreshold: Int64 = 16 << 20
    /// Part size (uploads: at least 5 MiB, raised so an object needs at most 10,000 parts).
    public var partSize: Int64 = 8 << 20
    /// Parts of one transfer in flight at once.
    public var partConcurrency: Int = 5
    public var retryPolicy = RetryPolicy()
    /// A whole transfer must finish within this time (TransferUtility's 50 minutes).
    public var timeoutSeconds: Double = 3000
    /// The additional checksum sent with uploads (nil: none).
    public var checksum: ChecksumAlgorithm? = .crc32c
    /// Copies of larger objects use multipart copy (UploadPartCopy); S3's CopyObject stops at 5 GiB.
    public var copyThreshold: Int64 = 5 << 30
    /// Part size of multipart copies (nothing passes through Ferry, so parts can be large).
    public var copyPartSize: Int64 = 512 << 20
    /// `data:` sources larger than this are refused (base64 inflates by 4/3, and
    /// the whole request must fit the 900,000-byte message limit).
    public var maxDataURIBytes: Int = RequestLimits.maxDataURIBytes
    /// fsync a download before it is renamed into place, so `completed` means
    /// on disk (the worker's contract). `ferry cp` turns it off unless `--fsync`,
    /// like cp and the other S3 tools.
    public var syncDownloads = true

    public init() {}

    /// These settings with a request's options applied; each option must be in
    /// its documented range (`TransferOptionRanges`), as the request decoder checked.
    public func applying(_ options: TransferOptions?) throws(FerryError) -> TransferSettings {
        guard let options else { return self }
        if let problem = TransferOptionRanges.violation(of: options) { throw problem }
        var s = self
        if let size = options.partSizeBytes { s.partSize = Int64(size) }
        if let n = options.partConcurrency { s.partConcurrency = n }
        if let n = options.retryLimit { s.retryPolicy.retryLimit = n }
        if let t = options.timeoutSeconds { s.timeoutSeconds = t }
        if options.checksumAlgorithm != nil { s.checksum = try ChecksumAlgorithm.parse(options.checksumAlgorithm) }
        return s
    }
}
