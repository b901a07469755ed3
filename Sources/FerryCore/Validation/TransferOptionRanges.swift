/// The documented range of every number a request's `options` may carry
/// (docs/producers/requests.md). Checked when a request is decoded and when the
/// same settings come from flags or a configuration file; nothing downstream
/// converts an unchecked input number, so none can trap.
public enum TransferOptionRanges {
    /// S3's part sizes: 5 MiB … 5 GiB.
    public static let partSizeBytes: ClosedRange<Int> = (5 << 20)...(5 << 30)
    public static let partConcurrency: ClosedRange<Int> = 1...64
    public static let retryLimit: ClosedRange<Int> = 0...20
    /// One second to seven days (TransferUtility's default is 50 minutes).
    public static let timeoutSeconds: ClosedRange<Double> = 1...604_800
    /// The names `checksumAlgorithm` accepts (any case).
    public static let checksumAlgorithms = ["CRC32C", "CRC32", "SHA256", "NONE"]

    /// The first option outside its range, if any.
    public static func violation(of options: TransferOptions) -> FerryError? {
        if let n = options.partSizeBytes, !partSizeBytes.contains(n) {
            return FerryError(.invalidRequest, "partSizeBytes must be 5 MiB…5 GiB (\(partSizeBytes.lowerBound)…\(partSizeBytes.upperBound)), got \(n)")
        }
        if let n = options.partConcurrency, !partConcurrency.contains(n) {
            return FerryError(.invalidRequest, "partConcurrency must be \(partConcurrency.lowerBound)…\(partConcurrency.upperBound), got \(n)")
        }
        if let n = options.retryLimit, !retryLimit.contains(n) {
            return FerryError(.invalidRequest, "retryLimit must be \(retryLimit.lowerBound)…\(retryLimit.upperBound), got \(n)")
        }
        if let t = options.timeoutSeconds, !(t.isFinite && timeoutSeconds.contains(t)) {
            return FerryError(.invalidRequest, "timeoutSeconds must be \(Int(timeoutSeconds.lowerBound))…\(Int(timeoutSeconds.upperBound)) seconds, got \(t)")
        }
        if let name = options.checksumAlgorithm, !checksumAlgorithms.contains(name.uppercased()) {
            return FerryError(.invalidRequest, "checksumAlgorithm must be CRC32C, CRC32, SHA256 or NONE, got '\(name.prefix(64))'")
        }
        return nil
    }
}
