import FerryStorage
/// Whether a ranged GET's answer holds the bytes that were asked for.
///
/// A download writes each range's body at the range's offset, and an object
/// larger than the multipart threshold with no full-object checksum has no
/// whole-file check after it: a body of other bytes would be taken as the
/// range's. So the answer must say it is the range asked for:
/// - `206` names its bytes in `Content-Range: bytes A-B/T` (T may be `*`):
///   A is the first byte asked for, B the last (or the object's last, when
///   the range runs past its end; with T unknown, the last asked for), and
///   the body is B-A+1 bytes long;
/// - `200` means the server ignored `Range` (HTTP allows it) and sent the
///   whole object: its bytes start at 0, so only a range starting at 0 can
///   use them (the size limit stops a body longer than the range).
/// Anything else (another range, no `Content-Range`, a list of ranges) is refused.
enum ServedRange {
    /// Why the answer does not hold the bytes `asked`; nil when it does.
    static func problem(asked: ClosedRange<Int64>, status: Int, contentRange: String?, bodyLength: Int64) -> String? {
        let wanted = "bytes \(asked.lowerBound)-\(asked.upperBound)"
        if status == 200 {
            return asked.lowerBound == 0 ? nil : "HTTP 200 with the whole object (from byte 0) to a request for \(wanted)"
        }
        guard status == 206 else { return nil }  // other statuses are errors, reported as such
        guard let contentRange else { return "HTTP 206 without a Content-Range to a request for \(wanted)" }
        let said = "Content-Range '\(contentRange.prefix(80))' to a request for \(wanted)"
        guard let (first, last, total) = parse(contentRange) else { return "an unreadable \(said)" }
        let lastAsked = total.map { min(asked.upperBound, $0 - 1) } ?? asked.upperBound
        guard first == asked.lowerBound, last == lastAsked else {
            return "bytes \(first)-\(last) (\(said))"
        }
        // Compared without `+ 1`: with a `*` total, `last` may be Int64.max.
        guard bodyLength - 1 == last - first else {
            return "\(bodyLength) bytes of body for bytes \(first)-\(last) (\(said))"
        }
        return nil
    }

    /// "bytes A-B/T" or "bytes A-B/*" with A ≤ B (< T): (A, B, T or nil).
    static func parse(_ text: String) -> (Int64, Int64, Int64?)? {
        guard text.hasPrefix("bytes ") else { return nil }
        let parts = text.dropFirst(6).split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let span = parts[0].split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard span.count == 2, let first = digits(span[0]), let last = digits(span[1]), first <= last else { return nil }
        if parts[1] == "*" { return (first, last, nil) }
        guard let total = digits(parts[1]), last < total else { return nil }
        return (first, last, total)
    }

    /// A decimal number of ASCII digits only (no sign, no spaces), or nil.
    private static func digits(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(text)
    }
}
