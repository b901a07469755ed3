import FerryCore
import Foundation

/// S3's additional checksums, sent per request as `x-amz-checksum-<name>`
/// (base64 of the big-endian digest) and stored with each part.
public enum ChecksumAlgorithm: String, Sendable, Hashable, CaseIterable, Codable {
    case crc32c = "CRC32C", crc32 = "CRC32", sha256 = "SHA256"

    /// Parses a request's `checksumAlgorithm`; `NONE` (or nil) means no checksum.
    public static func parse(_ text: String?) throws(FerryError) -> ChecksumAlgorithm? {
        guard let text, text.uppercased() != "NONE" else { return nil }
        guard let algorithm = ChecksumAlgorithm(rawValue: text.uppercased()) else {
            throw FerryError(.invalidRequest, "checksumAlgorithm must be CRC32C, CRC32, SHA256 or NONE, got '\(text)'")
        }
        return algorithm
    }

    /// `x-amz-checksum-crc32c` etc.
    public var headerName: String { "x-amz-checksum-\(rawValue.lowercased())" }
    /// The element name in CompleteMultipartUpload / ListParts XML: `ChecksumCRC32C`.
    public var xmlElement: String { "Checksum\(rawValue)" }

    /// An incremental computation of this checksum.
    public func makeHasher() -> ChecksumHasher { ChecksumHasher(self) }
}

/// Computes one `ChecksumAlgorithm` over bytes fed in pieces.
public struct ChecksumHasher {
    private var crc: CRC32?
    private var sha: Digest.Hasher?

    init(_ algorithm: ChecksumAlgorithm) {
        switch algorithm {
        case .crc32c: crc = CRC32(.castagnoli); sha = nil
        case .crc32: crc = CRC32(.ieee); sha = nil
        case .sha256: crc = nil; sha = Digest.Hasher.sha256()
        }
    }

    public mutating func update(_ buffer: UnsafeRawBufferPointer) {
        if crc != nil { crc!.update(buffer) } else { sha!.update(buffer) }
    }

    /// The base64 value S3 expects.
    public func finish() -> String {
        if let crc {
            let v = crc.checksum
            return Data([UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)]).base64EncodedString()
        }
        return Data(sha!.finish()).base64EncodedString()
    }
}
