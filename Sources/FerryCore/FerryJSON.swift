import Foundation

/// How Ferry writes JSON: one configuration, so that the same value leaves as
/// the same bytes whichever way it goes (a topic, a webhook, a Kafka forward
/// target, a file, a callback): compact, `/` written as is, dates as seconds
/// since 2001 and data as base64 (Foundation's defaults). It comes in two
/// member orders:
/// - `encode`: the order the value encodes its members, in one pass
///   (`StreamingJSONEncoder`); every message and record Ferry writes;
/// - `encodeSorted`: members sorted by name, for what people read and compare
///   across processes (the command line's `--json`, the admin API, JSON logs,
///   a value's description); optionally pretty-printed.
public enum FerryJSON {
    private static let streaming = StreamingJSONEncoder()

    public static func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        try streaming.encode(value)
    }

    public static func encodeSorted<T: Encodable>(_ value: T, pretty: Bool = false) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted] : [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(value))
    }

    /// `encode`, as text.
    public static func text<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try encode(value), as: UTF8.self)
    }
}
