import CFerryChecksum

/// CRC-32 (IEEE, as zlib) and CRC-32C (Castagnoli, as iSCSI and S3's default
/// checksum). The work is in C (`CFerryChecksum`): CRC-32C runs on the CPU's
/// CRC32 instruction where there is one, about four times the table speed.
public struct CRC32: Sendable {
    public enum Polynomial: Sendable {
        case ieee, castagnoli
        var reversed: UInt32 { self == .ieee ? FERRY_CRC32_IEEE : FERRY_CRC32_CASTAGNOLI }
    }

    private let polynomial: UInt32
    public private(set) var value: UInt32 = 0xFFFF_FFFF

    public init(_ polynomial: Polynomial) {
        self.polynomial = polynomial.reversed
    }

    /// The checksum of everything added so far.
    public var checksum: UInt32 { value ^ 0xFFFF_FFFF }

    public mutating func update(_ buffer: UnsafeRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        value = ferry_crc32_update(polynomial, value, base, buffer.count)
    }

    public mutating func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    /// The checksum of bytes A followed by bytes B, from A's checksum, B's
    /// checksum and B's length (`ferry_crc32_combine`): pieces checksummed
    /// as they stream, in any order, make the whole's without a second pass.
    public static func combine(_ first: UInt32, _ second: UInt32, secondLength: Int64, _ polynomial: Polynomial) -> UInt32 {
        precondition(secondLength >= 0, "a length is never negative")
        return ferry_crc32_combine(polynomial.reversed, first, second, UInt64(secondLength))
    }

    /// Whether CRC-32C runs on the CPU's instruction here (for the benchmark notes and tests).
    public static var castagnoliInHardware: Bool { ferry_crc32c_hardware() != 0 }
}
