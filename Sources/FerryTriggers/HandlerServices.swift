import FerryCore
import FerryKafka
import FerryS3
import FerryStorage
import FerryTriggerKit
import Foundation
import FerryConcurrency

// The worker's side of the trigger kit's capability protocols: handlers see
// `ObjectReader`, `MessageSender`, `HTTPSender` and `BlockingWork`; these
// are them over the worker's storage client, producer, transport and pool.

extension TriggerEnvironment {
    /// The environment a worker hands its handlers: its storage (when it has
    /// one), its HTTP transport and its blocking pool.
    public static func worker(dataRoot: URL, outputDirectory: URL, region: String,
                              prefixResolver: any PrefixResolver = DefaultPrefixResolver(),
                              store: (any ObjectStore)?, transport: CurlTransport) -> TriggerEnvironment {
        TriggerEnvironment(dataRoot: dataRoot, outputDirectory: outputDirectory, region: region, prefixResolver: prefixResolver,
                           objects: store.map { StorageObjectReader(store: $0, scratchDirectory: outputDirectory) },
                           http: TransportHTTPSender(transport: transport), blocking: PoolBlockingWork())
    }
}

/// Reads an object in ranges of `chunkBytes`, each fetched when the handler
/// asks for the next chunk, every one on the condition that the object is
/// still the version the first answer named (If-Match on its ETag): a
/// handler never sees the bytes of two versions as one object. A range lands
/// in an unlinked scratch file under the output directory (the store writes
/// into a descriptor), so memory holds one chunk whatever the object's size.
struct StorageObjectReader: ObjectReader {
    let store: any ObjectStore
    let scratchDirectory: URL
    static let chunkBytes: Int64 = 4 << 20

    func object(bucket: String, key: String) async throws -> StoredObject? {
        guard let head = try await store.headObject(bucket: bucket, key: key, headers: [:]) else { return nil }
        let store = self.store, directory = scratchDirectory.appendingPathComponent(".ferry-read")
        let bytes = ObjectBytes {
            let reader = RangeReader(store: store, bucket: bucket, key: key, size: head.size, eTag: head.eTag, directory: directory)
            return { try await reader.next() }
        }
        return StoredObject(size: head.size, eTag: head.eTag, contentType: head.contentType, bytes: bytes)
    }
}

private actor RangeReader {
    let store: any ObjectStore
    let bucket: String, key: String, size: Int64, eTag: String?
    let directory: URL
    private var offset: Int64 = 0
    private var scratch: Int32 = -1

    init(store: any ObjectStore, bucket: String, key: String, size: Int64, eTag: String?, directory: URL) {
        self.store = store; self.bucket = bucket; self.key = key; self.size = size; self.eTag = eTag; self.directory = directory
    }

    deinit { if scratch >= 0 { close(scratch) } }

    func next() async throws -> [UInt8]? {
        guard offset < size else { return nil }
        let length = min(StorageObjectReader.chunkBytes, size - offset)
        let fd = try await scratchFile()
        let input = GetObjectInput(bucket: bucket, key: key, range: offset...(offset + length - 1), ifMatch: eTag, maxBytes: length)
        let answer = try await store.getObject(input, into: fd, at: 0, progress: nil)
        guard answer.bytesReceived == length else {
            throw FerryError(.internalError, "s3://\(bucket)/\(key): \(answer.bytesReceived) bytes came for a range of \(length)")
        }
        let chunk = try await BlockingPool.shared.run { () throws(FerryError) -> [UInt8] in
            var buffer = [UInt8](repeating: 0, count: Int(length))
            var done = 0
            while done < buffer.count {
                let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, $0.count - done, off_t(done)) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { throw FerryError(.internalError, "reading a scratch range: \(String(cString: strerror(errno)))") }
                done += n
            }
            return buffer
        }
        offset += length
        return chunk
    }

    /// An unlinked file only this reader holds, made on the first range.
    private func scratchFile() async throws -> Int32 {
        if scratch >= 0 { return scratch }
        let directory = self.directory
        scratch = try await BlockingPool.shared.run { () throws(FerryError) -> Int32 in
            try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let path = directory.appendingPathComponent(UUID().uuidString).path
            let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw FerryError(.internalError, "cannot create a scratch file in \(directory.path): \(String(cString: strerror(errno)))") }
            unlink(path)
            return fd
        }
        return scratch
    }
}

/// A handler's messages go through the worker's producer.
struct ProducerMessageSender: MessageSender {
    let producer: KafkaProducer
    func send(topic: String, key: [UInt8]?, value: [UInt8]) async throws {
        try await producer.send(topic: topic, key: key, value: value)
    }
}

/// A handler's HTTP requests go through the worker's transport, inside its
/// connection and memory limits.
struct TransportHTTPSender: HTTPSender {
    let transport: CurlTransport
    func send(_ request: TriggerHTTPRequest) async throws -> TriggerHTTPResponse {
        var call = HTTPRequest(method: request.method, url: request.url, headers: request.headers,
                               body: request.body.isEmpty ? .none : .bytes(request.body))
        call.timeLimitSeconds = max(1, request.timeoutSeconds)
        let answer = try await transport.execute(call)
        return TriggerHTTPResponse(status: answer.status, headers: answer.headers, body: answer.body)
    }
}

/// A handler's blocking work runs on the worker's blocking pool.
struct PoolBlockingWork: BlockingWork {
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await BlockingPool.shared.run { Result { try body() } }.get()
    }
}
