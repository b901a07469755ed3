extension String {
    /// The text a C library wrote into a fixed-size `char` buffer: up to its
    /// first NUL (or the whole buffer when there is none, so a message that
    /// filled it is not read past its end); invalid UTF-8 is repaired.
    public init(cBuffer chars: some Collection<CChar>) {
        self = String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
