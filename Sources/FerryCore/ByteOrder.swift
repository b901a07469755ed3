/// Prefixes and suffixes of keys and paths as S3 and the file system see
/// them: by their UTF-8 bytes. Swift's `hasPrefix` compares characters under
/// canonical equivalence, so `"e\u{301}"` equals `"é"`, `"\u{212A}"` (the
/// Kelvin sign) equals `"K"`, and `"x\u{301}"` does not start with `"x"`:
/// a key could match a trigger, a listing or an owner's area that its bytes
/// do not, and miss one they do.
extension StringProtocol {
    /// Whether the UTF-8 bytes start with `prefix`'s.
    public func hasBytePrefix(_ prefix: some StringProtocol) -> Bool { utf8.starts(with: prefix.utf8) }

    /// Whether the UTF-8 bytes end with `suffix`'s.
    public func hasByteSuffix(_ suffix: some StringProtocol) -> Bool {
        utf8.count >= suffix.utf8.count && utf8.reversed().starts(with: suffix.utf8.reversed())
    }

}

extension String {
    /// The text after the first `count` UTF-8 bytes (a whole number of scalars, as after `hasBytePrefix`).
    public func droppingBytes(_ count: Int) -> Substring {
        self[utf8.index(utf8.startIndex, offsetBy: count)...]
    }
}
