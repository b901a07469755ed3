import Foundation

/// Time formats of the contracts.
public enum Timestamp {
    /// `2026-11-21T05:00:00.123Z`: ISO-8601, milliseconds, UTC (S3 events, statuses).
    public static func iso8601(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970.rounded(.down))
        let ms = Int((date.timeIntervalSince1970 - Double(t)) * 1000)
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                      Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
                      Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), min(ms, 999))
    }
}
