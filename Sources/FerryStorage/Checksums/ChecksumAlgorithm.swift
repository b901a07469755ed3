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

    /// The CRC's polynomial; nil for SHA-256, whose whole value cannot be
    /// made from its pieces'. The CRCs are what S3 keeps as a FULL_OBJECT
    /// checksum of a multipart upload.
    public var polynomial: CRC32.Polynomial? {
        switch self {
        case .crc32c: .castagnoli
        case .crc32: .ieee
        case .sha256: nil
        }
    }

    /// The value of bytes given in consecutive pieces, from each piece's
    /// value (base64, as S3 sends it) and length; nil for SHA-256, for no
    /// pieces, or when a value is not a CRC's four bytes.
    public func combined(_ pieces: [(value: String, length: Int64)]) -> String? {
        guard let polynomial, var whole = pieces.first.flatMap({ Self.crc(fromBase64: $0.value) }) else { return nil }
        for piece in pieces.dropFirst() {
            guard let value = Self.crc(fromBase64: piece.value) else { return nil }
            whole = CRC32.combine(whole, value, secondLength: piece.length, polynomial)
        }
        return Self.base64(crc: whole)
    }

    /// A CRC as S3 writes it: base64 of its four bytes, big-endian.
    public static func base64(crc value: UInt32) -> String {
        Data([UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]).base64EncodedString()
    }

    /// The CRC of S3's base64 form; nil unless it is exactly four bytes.
    static func crc(fromBase64 text: String) -> UInt32? {
        guard text.utf8.count == 8, let bytes = Data(base64Encoded: text), bytes.count == 4 else { return nil }
        return bytes.reduce(0) { $0 << 8 | UInt32($1) }
    }
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

    /// The CRC of the bytes so far, as a number; nil for SHA-256.
    public var crcValue: UInt32? { crc?.checksum }

    /// The base64 value S3 expects.
    public func finish() -> String {
        if let crc { return ChecksumAlgorithm.base64(crc: crc.checksum) }
        return Data(sha!.finish()).base64EncodedString()
    }
}
