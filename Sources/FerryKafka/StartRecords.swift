/// Starts without an outcome (by offset), as the text a Kafka offset commit
/// carries in its metadata: `ferry-starts:v1:<offset>=<starts>,…`. Every worker
/// that takes the partition next reads them with the committed offset, so the
/// crash-loop breaker counts a message's starts across the fleet.
public enum StartRecords {
    public static let prefix = "ferry-starts:v1:"
    /// Below Kafka's default `offset.metadata.max.bytes` (4096).
    public static let maxBytes = 3000

    /// The metadata text for `starts` (entries with the most starts first when
    /// they do not all fit); nil when there is nothing to record.
    public static func encode(_ starts: [Int64: Int]) -> String? {
        let live = starts.filter { $0.value > 0 }
        guard !live.isEmpty else { return nil }
        var text = prefix
        var first = true
        for (offset, count) in live.sorted(by: { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }) {
            let entry = "\(offset)=\(count)"
            guard text.utf8.count + entry.utf8.count + 1 <= maxBytes else { break }
            text += (first ? "" : ",") + entry
            first = false
        }
        return text
    }

    /// The starts a commit's metadata records; empty for metadata that is not
    /// Ferry's (another tool's, or none) or that does not parse.
    public static func decode(_ metadata: String?) -> [Int64: Int] {
        guard let metadata, metadata.hasPrefix(prefix) else { return [:] }
        var starts: [Int64: Int] = [:]
        for entry in metadata.dropFirst(prefix.count).split(separator: ",") {
            let parts = entry.split(separator: "=")
            guard parts.count == 2, let offset = Int64(parts[0]), let count = Int(parts[1]), offset >= 0, count > 0 else { continue }
            starts[offset] = max(starts[offset] ?? 0, min(count, 1_000_000))
        }
        return starts
    }
}
