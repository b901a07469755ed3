/// CRC-32 (IEEE, as zlib) and CRC-32C (Castagnoli, as iSCSI and S3's default
/// checksum), table-driven, eight bytes per step ("slicing-by-8").
public struct CRC32: Sendable {
    public enum Polynomial: Sendable {
        case ieee, castagnoli
        var reversed: UInt32 { self == .ieee ? 0xEDB8_8320 : 0x82F6_3B78 }
    }

    private let tables: [[UInt32]]
    public private(set) var value: UInt32 = 0xFFFF_FFFF

    private static let ieeeTables = makeTables(Polynomial.ieee.reversed)
    private static let castagnoliTables = makeTables(Polynomial.castagnoli.reversed)

    public init(_ polynomial: Polynomial) {
        tables = polynomial == .ieee ? Self.ieeeTables : Self.castagnoliTables
    }

    /// The checksum of everything added so far.
    public var checksum: UInt32 { value ^ 0xFFFF_FFFF }

    public mutating func update(_ buffer: UnsafeRawBufferPointer) {
        var crc = value
        var index = 0
        let count = buffer.count
        tables.withUnsafeBufferPointer { t in
            let t0 = t[0], t1 = t[1], t2 = t[2], t3 = t[3], t4 = t[4], t5 = t[5], t6 = t[6], t7 = t[7]
            t0.withUnsafeBufferPointer { t0 in t1.withUnsafeBufferPointer { t1 in t2.withUnsafeBufferPointer { t2 in
            t3.withUnsafeBufferPointer { t3 in t4.withUnsafeBufferPointer { t4 in t5.withUnsafeBufferPointer { t5 in
            t6.withUnsafeBufferPointer { t6 in t7.withUnsafeBufferPointer { t7 in
                while index + 8 <= count {
                    let lo = buffer.loadUnaligned(fromByteOffset: index, as: UInt32.self).littleEndian ^ crc
                    let hi = buffer.loadUnaligned(fromByteOffset: index + 4, as: UInt32.self).littleEndian
                    crc = t7[Int(lo & 0xFF)] ^ t6[Int((lo >> 8) & 0xFF)] ^ t5[Int((lo >> 16) & 0xFF)] ^ t4[Int(lo >> 24)]
                        ^ t3[Int(hi & 0xFF)] ^ t2[Int((hi >> 8) & 0xFF)] ^ t1[Int((hi >> 16) & 0xFF)] ^ t0[Int(hi >> 24)]
                    index += 8
                }
                while index < count {
                    crc = t0[Int((crc ^ UInt32(buffer[index])) & 0xFF)] ^ (crc >> 8)
                    index += 1
                }
            }}}}}}}}
        }
        value = crc
    }

    public mutating func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    private static func makeTables(_ reversed: UInt32) -> [[UInt32]] {
        var tables = [[UInt32]](repeating: [UInt32](repeating: 0, count: 256), count: 8)
        for i in 0..<256 {
            var crc = UInt32(i)
            for _ in 0..<8 { crc = (crc & 1) == 1 ? (crc >> 1) ^ reversed : crc >> 1 }
            tables[0][i] = crc
        }
        for i in 0..<256 {
            for k in 1..<8 { tables[k][i] = (tables[k - 1][i] >> 8) ^ tables[0][Int(tables[k - 1][i] & 0xFF)] }
        }
        return tables
    }
}
