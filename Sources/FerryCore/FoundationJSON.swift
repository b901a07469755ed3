import Foundation

/// `JSONSerialization`, reading every string as it is written. Foundation's
/// reader drops a raw U+FEFF that starts a string or a name (`"\u{FEFF}public/a"`
/// reads as `public/a`; the escape `\ufeff` is kept), so a filter pattern or
/// the record it is matched against could mean another key than the one
/// written. Such a mark inside a string is handed to the reader escaped; the
/// text is otherwise unchanged (a mark outside strings stays as it is).
public enum FoundationJSON {
    public static func object(_ bytes: some Collection<UInt8>, options: JSONSerialization.ReadingOptions = []) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(escapingMarks(Array(bytes))), options: options)
    }

    /// `bytes` with each U+FEFF inside a JSON string written `\ufeff`.
    static func escapingMarks(_ bytes: [UInt8]) -> [UInt8] {
        guard hasMark(bytes) else { return bytes }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 16)
        var inString = false
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if inString {
                if byte == UInt8(ascii: "\\") {
                    out.append(byte)
                    if index + 1 < bytes.count { out.append(bytes[index + 1]) }
                    index += 2
                    continue
                }
                if byte == UInt8(ascii: "\"") {
                    inString = false
                } else if isMark(bytes, at: index) {
                    out.append(contentsOf: Array(#"\ufeff"#.utf8))
                    index += 3
                    continue
                }
            } else if byte == UInt8(ascii: "\"") {
                inString = true
            }
            out.append(byte)
            index += 1
        }
        return out
    }

    private static func hasMark(_ bytes: [UInt8]) -> Bool {
        var index = 0
        while let found = bytes[index...].firstIndex(of: 0xEF) {
            if isMark(bytes, at: found) { return true }
            index = found + 1
        }
        return false
    }

    private static func isMark(_ bytes: [UInt8], at index: Int) -> Bool {
        index + 2 < bytes.count && bytes[index] == 0xEF && bytes[index + 1] == 0xBB && bytes[index + 2] == 0xBF
    }
}
