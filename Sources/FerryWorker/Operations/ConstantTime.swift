/// Comparison whose time does not depend on where the inputs differ, for
/// secrets compared with what a client sent (a timing side channel would
/// otherwise reveal a token byte by byte).
enum ConstantTime {
    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        // Every byte of the longer input is visited; a length difference counts as a difference.
        var difference = UInt(a.count ^ b.count)
        for i in 0..<max(a.count, b.count) {
            let x = i < a.count ? a[i] : 0
            let y = i < b.count ? b[i] : 0
            difference |= UInt(x ^ y)
        }
        return difference == 0
    }
}
