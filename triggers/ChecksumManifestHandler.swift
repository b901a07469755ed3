import FerryCore
import FerryS3
import FerryTriggers
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
        guard let store = context.environment.objects else {
            throw ManifestError("no object storage configured for trigger handlers (run inside a worker)")
        }
        let (size, sha256) = try await Self.digest(bucket: bucket, key: key, store: store, scratch: context.environment.outputDirectory)
        let manifest = Manifest(bucket: bucket, key: key, size: size, eTag: record.dynamodb.newImage?["eTag"]?.stringValue,
                                sha256: sha256, sequenceNumber: record.dynamodb.sequenceNumber)
        let body = Data(try FerryJSON.encodeSorted(manifest)).base64EncodedString()
        let relative = String(key.dropFirst(watchedPrefix.count))
        try await context.transfers.enqueue(TransferRequest(
            id: "manifest-\(record.eventID)", op: .upload, bucket: bucket, key: "\(manifestPrefix)\(relative).sha256.json",
            source: "data:application/json;base64,\(body)", contentType: "application/json"))
        context.logger.info("checksum manifest enqueued for s3://\(bucket)/\(key)", metadata: ["sha256": "\(sha256)"])
    }

    /// Reads the object into a scratch file under the output directory and hashes it.
    /// The file work runs on Ferry's blocking pool: hashing a large object on
    /// the Swift concurrency threads that run handlers would stall them.
    static func digest(bucket: String, key: String, store: any ObjectStore, scratch: URL) async throws -> (Int64, String) {
        let directory = scratch.appendingPathComponent(".ferry-manifest")
        let path = directory.appendingPathComponent(UUID().uuidString).path
        let fd = try await BlockingPool.shared.run { () -> Result<Int32, any Error> in
            Result {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
                guard fd >= 0 else { throw ManifestError("cannot create \(path)") }
                return fd
            }
        }.get()
        defer { close(fd); unlink(path) }
        let attributes = try await store.getObject(bucket: bucket, key: key, into: fd)
        let size = attributes.size
        let sha256 = try await BlockingPool.shared.run { () -> Result<String, any Error> in
            Result {
                let hasher = Digest.Hasher.sha256()
                var buffer = [UInt8](repeating: 0, count: 1 << 20)
                var offset: off_t = 0
                while true {
                    let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, offset) }
                    if n < 0 && errno == EINTR { continue }
                    guard n >= 0 else { throw ManifestError("cannot read \(path): \(String(cString: strerror(errno)))") }
                    guard n > 0 else { break }
                    buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                    offset += off_t(n)
                }
                // A short file is not the object: no manifest for what was not read.
                guard Int64(offset) == size else { throw ManifestError("read \(offset) bytes of \(path), the object has \(size)") }
                return hasher.finish().hexString
            }
        }.get()
        return (size, sha256)
    }

    struct ManifestError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
