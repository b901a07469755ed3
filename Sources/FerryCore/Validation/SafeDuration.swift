/// `Duration`s from numbers that came from outside (requests, flags, files,
/// handler registrations). `Duration.seconds(Double)` traps on values it cannot
/// represent (1e21, infinity, NaN); these never trap.
extension Duration {
    /// The longest wait Ferry ever schedules: ten years.
    public static let longestWait = Duration.seconds(315_360_000)

    /// `seconds` as a duration, clamped to 0…`longestWait`; NaN is zero.
    public static func seconds(clamping seconds: Double) -> Duration {
        guard seconds > 0 else { return .zero }  // also NaN
        guard seconds < 315_360_000 else { return longestWait }
        return .nanoseconds(Int64(seconds * 1_000_000_000))
    }

    /// `milliseconds` as a duration, clamped like `seconds(clamping:)`.
    public static func milliseconds(clamping milliseconds: Double) -> Duration {
        seconds(clamping: milliseconds / 1000)
    }

    /// This duration in seconds.
    public var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

extension Double {
    /// This value as an `Int`, clamped to `range` (NaN is the lower bound):
    /// for converting an input number that may be huge, negative or not finite.
    public func clampedInt(_ range: ClosedRange<Int> = Int.min...Int.max) -> Int {
        guard !isNaN else { return range.lowerBound }
        if self <= Double(range.lowerBound) { return range.lowerBound }
        // Double(Int.max) rounds up to 2^63, which Int cannot hold: compare with >=.
        if self >= Double(range.upperBound) { return range.upperBound }
        return Int(self)
    }
}
