import FerryTriggerKit
import Foundation

/// Example stream trigger on a record table (`posts`, declared on the workers
/// with `--table posts:id:delete-files`): appends one JSON line per change to
/// `<output directory>/feed/posts.jsonl` with the post's id, its title and the S3
/// keys of the pictures it references. Delivery is at least once: readers
/// deduplicate by (id, sequenceNumber).
public struct PostFeedHandler: StreamRecordHandler {
    public let file: URL

    public init(file: URL) { self.file = file }

    public struct Line: Codable, Hashable, Sendable {
        public var eventName: String
        public var id: String
        public var title: String?
        /// The `S3Object` keys the post references after the change (before it, for a REMOVE).
        public var pictures: [String]
        public var sequenceNumber: String
    }

    public func handle(_ event: DynamoDBEvent, context: TriggerContext) async throws -> StreamBatchResponse {
        var text = Data()
        for record in event.records {
            let image = record.dynamodb.newImage ?? record.dynamodb.oldImage ?? [:]
            let pictures = image.referencedObjects.map(\.key).sorted()
            let line = Line(eventName: record.eventName.rawValue, id: record.dynamodb.keys["id"]?.stringValue ?? "?",
                            title: image["title"]?.stringValue, pictures: pictures, sequenceNumber: record.dynamodb.sequenceNumber)
            text.append(contentsOf: try FerryJSON.encodeSorted(line))
            text.append(0x0A)
        }
        try await AuditFile.append(text, to: file, blocking: context.environment.blocking)
        context.logger.info("post feed: \(event.records.count) change(s) appended to \(file.path)")
        return StreamBatchResponse(failedEventIDs: [])
    }
}
