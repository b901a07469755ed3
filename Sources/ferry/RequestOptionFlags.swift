import ArgumentParser
import FerryCore

/// The request's `options` object (docs/producers/requests.md) as flags of
/// `ferry enqueue`, named as `ferry cp` names the same settings. They travel
/// with the request and override the worker's defaults for it alone.
struct RequestOptionFlags: ParsableArguments {
    @Option(name: .customLong("part-size"), help: "This transfer's part size, e.g. 16MiB (5MiB…5GiB; default: the worker's).")
    var partSize: String?

    @Option(name: .customLong("part-concurrency"), help: "Parts of this transfer in flight (1…64; default: the worker's).")
    var partConcurrency: Int?

    @Option(name: .customLong("retry-limit"), help: "Retries of a failed request of this transfer (0…20; default: the worker's).")
    var retryLimit: Int?

    @Option(name: .customLong("transfer-timeout"), help: "Seconds this transfer may take (1…604800; default: the worker's).")
    var transferTimeout: Double?

    @Option(name: .customLong("checksum"), help: "Additional upload checksum: CRC32C, CRC32, SHA256 or NONE (default: the worker's).")
    var checksum: String?

    @Flag(name: .customLong("accelerate"), help: "Use S3 Transfer Acceleration (AWS endpoints only; other stores refuse the request).")
    var accelerate = false

    /// nil when no flag was given, so that a request without them stays as it was.
    func options() throws -> TransferOptions? {
        let options = TransferOptions(
            partSizeBytes: try partSize.map { Int(clamping: try ByteSize.parse($0, option: "--part-size")) },
            partConcurrency: partConcurrency, retryLimit: retryLimit, timeoutSeconds: transferTimeout,
            accelerate: accelerate ? true : nil, checksumAlgorithm: checksum)
        guard options != TransferOptions() else { return nil }
        // The worker checks the same ranges; said here, the mistake costs no round trip.
        if let problem = TransferOptionRanges.violation(of: options) { throw ValidationError(Self.namingFlags(problem.message)) }
        var canonical = options
        canonical.checksumAlgorithm = checksum?.uppercased()
        return canonical
    }

    /// A `TransferOptionRanges` message with the request's field names replaced by
    /// the flags that set them (`ferry enqueue`'s and `ferry cp`'s alike).
    static func namingFlags(_ message: String) -> String {
        [("partSizeBytes", "--part-size"), ("partConcurrency", "--part-concurrency"), ("retryLimit", "--retry-limit"),
         ("timeoutSeconds", "--transfer-timeout"), ("checksumAlgorithm", "--checksum")]
            .reduce(message) { $0.replacingOccurrences(of: $1.0, with: $1.1) }
    }
}
