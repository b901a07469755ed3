/// `data:[<media type>][;base64],<data>` upload sources (RFC 2397), for small
/// payloads. Base64 is decoded strictly (RFC 4648 §4: the standard alphabet,
/// length a multiple of four, `=` only as the final padding, no stray bits),
/// so a payload that is not base64 is refused instead of uploaded as
/// something else.
public enum DataURI {
    /// The payload's bytes, or `InvalidRequest` saying what is wrong.
    public static func decode(_ uri: String, limit: Int) throws(FerryError) -> [UInt8] {
        let utf8 = Array(uri.utf8)
        guard utf8.count >= 5, String(decoding: utf8[0..<5], as: UTF8.self).lowercased() == "data:" else {
            throw FerryError(.invalidRequest, "source is not a data: URI")
        }
        guard let comma = utf8.firstIndex(of: UInt8(ascii: ",")) else { throw FerryError(.invalidRequest, "data: URI has no ','") }
        let header = String(decoding: utf8[5..<comma], as: UTF8.self).lowercased()
        let payload = utf8[(comma + 1)...]
        let isBase64 = header.hasSuffix(";base64")
        // Refused before decoding: base64 takes 4 characters per 3 bytes, an escape 3 per byte.
        guard payload.count <= (isBase64 ? (limit + 2) / 3 * 4 : limit * 3) else {
            throw FerryError(.invalidRequest, "data: source is larger than \(limit) bytes")
        }
        let bytes: [UInt8]
        if isBase64 {
            guard let decoded = StrictBase64.decode(payload) else {
                throw FerryError(.invalidRequest, "data: URI is not valid base64 (RFC 4648: A–Z a–z 0–9 + /, length a multiple of 4, '=' only as padding)")
            }
            bytes = decoded
        } else {
            guard let decoded = PercentDecoding.decode(payload) else {
                throw FerryError(.invalidRequest, "data: URI has bad percent-encoding")
            }
            bytes = decoded
        }
        guard bytes.count <= limit else { throw FerryError(.invalidRequest, "data: source is larger than \(limit) bytes") }
        return bytes
    }

    /// The media type before `;` (nil when none is given).
    public static func mediaType(_ uri: String) -> String? {
        let utf8 = Array(uri.utf8)
        guard utf8.count >= 5, let comma = utf8.firstIndex(of: UInt8(ascii: ",")), comma >= 5 else { return nil }
        let header = String(decoding: utf8[5..<comma], as: UTF8.self)
        let type = header.split(separator: ";").first.map(String.init) ?? ""
        return type.isEmpty ? nil : type
    }
}

/// RFC 4648 base64, decoded without leniency.
public enum StrictBase64 {
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8.enumerated() { table[Int(c)] = UInt8(i) }
        return table
    }()

    /// The decoded bytes, or nil when `text` is not canonical base64.
    public static func decode<C: Collection>(_ text: C) -> [UInt8]? where C.Element == UInt8 {
        let input = Array(text)
        guard input.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(input.count / 4 * 3)
        var i = 0
        while i < input.count {
            let last = i + 4 == input.count
            let c0 = values[Int(input[i])], c1 = values[Int(input[i + 1])]
            guard c0 != 0xFF, c1 != 0xFF else { return nil }
            let p2 = input[i + 2] == UInt8(ascii: "="), p3 = input[i + 3] == UInt8(ascii: "=")
            if p2 || p3 {
                // Padding only at the very end, and "x=" never before a data character.
                guard last, p3 else { return nil }
                if p2 {
                    guard c1 & 0x0F == 0 else { return nil }  // stray bits
                    out.append(c0 << 2 | c1 >> 4)
                } else {
                    let c2 = values[Int(input[i + 2])]
                    guard c2 != 0xFF, c2 & 0x03 == 0 else { return nil }
                    out.append(c0 << 2 | c1 >> 4)
                    out.append(c1 << 4 | c2 >> 2)
                }
            } else {
                let c2 = values[Int(input[i + 2])], c3 = values[Int(input[i + 3])]
                guard c2 != 0xFF, c3 != 0xFF else { return nil }
                out.append(c0 << 2 | c1 >> 4)
                out.append(c1 << 4 | c2 >> 2)
                out.append(c2 << 6 | c3)
            }
            i += 4
        }
        return out
    }
}

/// `%XX` decoding of bytes (RFC 3986); nil on a malformed escape.
enum PercentDecoding {
    static func decode<C: Collection>(_ text: C) -> [UInt8]? where C.Element == UInt8 {
        func hex(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        let input = Array(text)
        var out: [UInt8] = []
        out.reserveCapacity(input.count)
        var i = 0
        while i < input.count {
            if input[i] == UInt8(ascii: "%") {
                guard i + 2 < input.count, let h = hex(input[i + 1]), let l = hex(input[i + 2]) else { return nil }
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(input[i])
                i += 1
            }
        }
        return out
    }
}
