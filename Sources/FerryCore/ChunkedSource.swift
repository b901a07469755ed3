import Foundation

/// An upload whose bytes travel through Kafka, for producers that share no
/// filesystem with the workers (TransferUtility's `uploadData`, as a claim
/// check): `FerryClient.uploadData` writes the bytes as chunks to
/// `<prefix>.uploads`, then enqueues a request whose `source` names them by
/// position:
///
///     kafka-chunks://<topic>?size=<bytes>&sha256=<hex>&chunk=<bytes per chunk>&at=<partition>:<offset>,…
///
/// Chunk `i` holds bytes `i*chunk ..< min((i+1)*chunk, size)`; its message key
/// is `<transfer id>/<i>`. The worker checks every chunk's key and length and
/// the whole's size and SHA-256 before it uploads a byte. The topic's
/// retention is how long a claim check stays valid.
public struct ChunkedSource: Sendable, Hashable {
    public struct Position: Sendable, Hashable {
        public var partition: Int32
        public var offset: Int64
        public init(partition: Int32, offset: Int64) { self.partition = partition; self.offset = offset }
    }

    public var topic: String
    public var size: Int64
    public var sha256: String
    public var chunkSize: Int
    public var positions: [Position]

    public static let scheme = "kafka-chunks://"
    /// Kafka's default message limit is 1 MB: chunks stay well below it.
    public static let maxChunkBytes = 512 << 10
    /// 5 GiB at most, S3's limit for one PUT is not the bound (uploads above the threshold are multipart).
    public static let maxBytes: Int64 = 5 << 30
    public static let maxChunks = Int((maxBytes + Int64(maxChunkBytes) - 1) / Int64(maxChunkBytes)) * 4

    public init(topic: String, size: Int64, sha256: String, chunkSize: Int, positions: [Position]) {
        self.topic = topic; self.size = size; self.sha256 = sha256; self.chunkSize = chunkSize; self.positions = positions
    }

    public static func isChunked(_ source: String) -> Bool { source.hasPrefix(scheme) }

    /// Parses and checks a `kafka-chunks://` source.
    public init(parsing uri: String) throws(FerryError) {
        func invalid(_ why: String) -> FerryError { FerryError(.invalidRequest, "kafka-chunks source: \(why)") }
        guard uri.hasPrefix(Self.scheme), let components = URLComponents(string: uri), let topic = components.host,
              !topic.isEmpty, (components.path.isEmpty || components.path == "/") else {
            throw invalid("expected kafka-chunks://<topic>?size=…&sha256=…&chunk=…&at=…")
        }
        guard (try? CompletionCallback("kafka:\(topic)")) != nil else { throw invalid("'\(topic)' is not a topic name") }
        var fields: [String: String] = [:]
        for item in components.queryItems ?? [] {
            guard fields[item.name] == nil, let value = item.value else { throw invalid("'\(item.name)' given twice or without a value") }
            fields[item.name] = value
        }
        guard let sizeText = fields["size"], let size = Int64(sizeText), (0...Self.maxBytes).contains(size) else {
            throw invalid("size must be 0…\(Self.maxBytes)")
        }
        guard let chunkText = fields["chunk"], let chunkSize = Int(chunkText), (1...Self.maxChunkBytes).contains(chunkSize) else {
            throw invalid("chunk must be 1…\(Self.maxChunkBytes) bytes")
        }
        guard let sha = fields["sha256"], sha.utf8.count == 64, sha.utf8.allSatisfy({ $0.isLowercaseHexDigit }) else {
            throw invalid("sha256 must be 64 lowercase hex digits")
        }
        let expected = size == 0 ? 0 : Int((size + Int64(chunkSize) - 1) / Int64(chunkSize))
        let listed = (fields["at"] ?? "").split(separator: ",", omittingEmptySubsequences: false)
        guard expected <= Self.maxChunks, listed.count == expected || (expected == 0 && fields["at"] == "") else {
            throw invalid("at must list one partition:offset per chunk (\(expected))")
        }
        var positions: [Position] = []
        for item in listed where expected > 0 {
            let parts = item.split(separator: ":")
            guard parts.count == 2, let partition = Int32(parts[0]), (0...100_000).contains(partition),
                  let offset = Int64(parts[1]), offset >= 0 else {
                throw invalid("'\(item.prefix(40))' is not partition:offset")
            }
            positions.append(Position(partition: partition, offset: offset))
        }
        self.init(topic: topic, size: size, sha256: sha, chunkSize: chunkSize, positions: positions)
    }

    public var uri: String {
        let at = positions.map { "\($0.partition):\($0.offset)" }.joined(separator: ",")
        return "\(Self.scheme)\(topic)?size=\(size)&sha256=\(sha256)&chunk=\(chunkSize)&at=\(at)"
    }

    /// The byte range chunk `index` holds.
    public func range(of index: Int) -> Range<Int64> {
        let start = Int64(index) * Int64(chunkSize)
        return start..<min(start + Int64(chunkSize), size)
    }

    /// The message key of chunk `index` of transfer `id`.
    public static func key(transferId id: String, index: Int) -> String { "\(id)/\(index)" }
}

private extension UInt8 {
    var isLowercaseHexDigit: Bool { (0x30...0x39).contains(self) || (0x61...0x66).contains(self) }
}
