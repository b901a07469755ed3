import FerryTriggerKit
import Foundation

/// Example trigger: appends one JSON line per S3 event record to
/// `<output directory>/audit/audit.jsonl` — event name, bucket, decoded key, size,
/// eTag, sequencer. Delivery is at-least-once, so a line may repeat after a
/// crash; readers deduplicate by (bucket, key, sequencer).
public struct AuditLogHandler: S3EventHandler {
    public let file: URL

    public init(file: URL) { self.file = file }

    public struct Line: Codable, Hashable, Sendable {
        public var eventName: String
        public var bucket: String
        public var key: String
        public var size: Int64?
        public var eTag: String?
        public var sequencer: String?
        public var eventTime: String
        /// When the handler ran (eventTime is when the object changed): their gap is the delivery latency.
        public var handledAt: String?
    }

    /// `2026-11-21T05:00:00.123Z`, as S3 writes `eventTime`.
    static let eventTimeStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    public func handle(_ event: S3Event, context: TriggerContext) async throws {
        var text = Data()
        for record in event.records {
            let line = Line(eventName: record.eventName, bucket: record.s3.bucket.name, key: record.s3.object.decodedKey,
                            size: record.s3.object.size, eTag: record.s3.object.eTag,
                            sequencer: record.s3.object.sequencer, eventTime: record.eventTime,
                            handledAt: Date().formatted(Self.eventTimeStyle))
            text.append(contentsOf: try FerryJSON.encodeSorted(line))
            text.append(0x0A)
        }
        try await AuditFile.append(text, to: file, blocking: context.environment.blocking)
        context.logger.info("audit: \(event.records.count) record(s) appended to \(file.path)")
    }
}

/// Appends whole lines with O_APPEND, so concurrent writers never interleave
/// within a line. The write is blocking work, handed to the worker's
/// blocking threads (a slow disk must not stall the threads that run
/// handlers); the directory is created only when the file cannot be opened without it.
enum AuditFile {
    static func append(_ data: Data, to file: URL, blocking: any BlockingWork) async throws {
        try await blocking.run { try appendNow(data, to: file) }
    }

    /// Blocking.
    static func appendNow(_ data: Data, to file: URL) throws {
        var fd = open(file.path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        if fd < 0 && errno == ENOENT {
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            fd = open(file.path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        }
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == data.count else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }
}
