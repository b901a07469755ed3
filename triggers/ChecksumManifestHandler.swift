import Crypto
import FerryTriggerKit
import Foundation

/// Example derived-object writer: for every object written under a watched
/// prefix, computes its SHA-256 and enqueues a small JSON manifest next to it
/// in a *different* prefix (`manifests/…`). Writing the manifest under the
/// watched prefix would trigger this handler again, forever; Ferry's loop
/// guard refuses such a write (`RecursiveInvocationError`), and the
/// registration's filter keeps the manifests out of the handler's input.
///
/// The manifest's transfer id is derived from the stream record's eventID, so
/// a redelivered record enqueues the same transfer and it runs once.
public struct ChecksumManifestHandler: StreamRecordHandler {
    /// The watched S3 key prefix (`public/incoming/` for guest uploads to `incoming/…`).
    public var watchedPrefix: String
    /// Where manifests go, as a request key before the access-level prefix.
    public var manifestPrefix: String

    public init(watchedPrefix: String = "public/incoming/", manifestPrefix: String = "manifests/") {
        self.watchedPrefix = watchedPrefix; self.manifestPrefix = manifestPrefix
    }

    public struct Manifest: Codable, Hashable, Sendable {
        public var bucket: String
        public var key: String
        public var size: Int64
        public var eTag: String?
        public var sha256: String
        public var sequenceNumber: String
    }

    public func handle(_ event: DynamoDBEvent, context: TriggerContext) async throws -> StreamBatchResponse {
        var failed: [String] = []
        for record in event.records where record.eventName != .remove {
            do {
                try await writeManifest(for: record, context: context)
            } catch let error as RecursiveInvocationError {
                throw error  // a configuration mistake, not a flaky record: stop the invocation
            } catch {
                context.logger.error("checksum manifest for \(record.eventID) failed: \(error)")
                failed.append(record.eventID)
            }
        }
        return StreamBatchResponse(failedEventIDs: failed)
    }

    func writeManifest(for record: DynamoDBEvent.Record, context: TriggerContext) async throws {
        guard let bucket = record.dynamodb.keys["bucket"]?.stringValue, let key = record.dynamodb.keys["key"]?.stringValue,
              key.hasPrefix(watchedPrefix) else { return }
        guard let objects = context.objects else {
            throw ManifestError("no object storage configured for trigger handlers (run inside a worker)")
        }
        guard let object = try await objects.object(bucket: bucket, key: key) else {
            // Removed since the record was written: a later REMOVE record says so; nothing to describe.
            context.logger.info("checksum manifest: s3://\(bucket)/\(key) is gone, no manifest")
            return
        }
        let sha256 = try await Self.sha256(of: object)
        let manifest = Manifest(bucket: bucket, key: key, size: object.size, eTag: object.eTag,
                                sha256: sha256, sequenceNumber: record.dynamodb.sequenceNumber)
        let relative = String(key.dropFirst(watchedPrefix.count))
        try await context.transfers.upload(try FerryJSON.encodeSorted(manifest), id: "manifest-\(record.eventID)", bucket: bucket,
                                           key: "\(manifestPrefix)\(relative).sha256.json", contentType: "application/json")
        context.logger.info("checksum manifest enqueued for s3://\(bucket)/\(key)", metadata: ["sha256": "\(sha256)"])
    }

    /// The SHA-256 of the object's bytes, hashed as they arrive: memory holds
    /// one chunk, whatever the object's size.
    static func sha256(of object: StoredObject) async throws -> String {
        var hasher = SHA256()
        var read: Int64 = 0
        for try await chunk in object.bytes {
            hasher.update(data: chunk)
            read += Int64(chunk.count)
        }
        // A short read is not the object: no manifest for what was not read.
        guard read == object.size else { throw ManifestError("read \(read) bytes, the object has \(object.size)") }
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }

    struct ManifestError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
