import FerryCore
import FerryS3
import Foundation
import Logging

/// Runs transfers against an `ObjectStore` within the worker's limits, with
/// retries of transient failures. Local files stay inside the data root.
public final class TransferEngine: Sendable {
    public struct Configuration: Sendable {
        /// Transfers running at once in this process.
        public var maxTransfers: Int = 8
        /// Default retry behaviour; a request's `options.retryLimit` overrides the limit.
        public var retryPolicy = RetryPolicy()
        public init() {}
    }

    public let store: any ObjectStore
    public let dataRoot: DataRoot
    public let configuration: Configuration
    private let slots: TransferSlots
    private let logger: Logger

    public init(store: any ObjectStore, dataRoot: DataRoot, configuration: Configuration = .init(), logger: Logger) {
        self.store = store
        self.dataRoot = dataRoot
        self.configuration = configuration
        self.slots = TransferSlots(limit: configuration.maxTransfers)
        self.logger = logger
    }

    /// Transfers running now.
    public var inFlight: Int { slots.inUse }

    /// Runs `job` once a transfer slot is free. `progress` sees bytes moved.
    public func run(_ job: TransferJob, progress: @escaping @Sendable (TransferProgress) -> Void = { _ in })
        async throws(FerryError) -> TransferOutcome {
        await slots.acquire()
        defer { slots.release() }
        var policy = configuration.retryPolicy
        if let limit = job.request.options?.retryLimit { policy.retryLimit = max(0, limit) }
        switch job.request.op {
        case .upload: return try await upload(job, policy: policy, progress: progress)
        case .download: return try await download(job, policy: policy, progress: progress)
        case .delete: return try await delete(job, policy: policy)
        case .copy: return try await copy(job, policy: policy)
        }
    }

    // MARK: Operations

    private func upload(_ job: TransferJob, policy: RetryPolicy, progress: @Sendable (TransferProgress) -> Void)
        async throws(FerryError) -> TransferOutcome {
        let request = job.request
        guard let source = request.source else { throw FerryError(.invalidRequest, "upload needs a source") }
        let path = try dataRoot.sourcePath(source)
        // O_NOFOLLOW: a symbolic link swapped in after the check is refused, not followed.
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw FerryError(.localIOError, "cannot open \(source): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw FerryError(.invalidPath, "source \(source) is not a regular file")
        }
        let size = Int64(info.st_size)
        let contentType = request.contentType ?? ContentType.forFileName(path)
        let input = PutObjectInput(bucket: request.bucket, key: job.objectKey, contentType: contentType,
                                   metadata: request.metadata ?? [:])
        progress(TransferProgress(bytesTransferred: 0, totalBytes: size))
        var attempts = 1
        let result = try await policy.run(onRetry: { n, error in
            attempts = n + 1
            self.logger.warning("retrying upload", metadata: ["transfer": "\(request.id)", "retry": "\(n)", "error": "\(error)"])
        }) { () async throws(FerryError) -> ObjectWriteResult in
            try await store.putObject(input, body: .file(descriptor: fd, length: size))
        }
        progress(TransferProgress(bytesTransferred: size, totalBytes: size))
        return TransferOutcome(object: .init(bucket: request.bucket, key: job.objectKey, size: size,
                                             eTag: result.eTag, versionId: result.versionId),
                               eventName: "ObjectCreated:Put", requestId: result.requestId, hostId: result.hostId,
                               bytesTransferred: size, attempts: attempts)
    }

    private func download(_ job: TransferJob, policy: RetryPolicy, progress: @Sendable (TransferProgress) -> Void)
        async throws(FerryError) -> TransferOutcome {
        let request = job.request
        guard let destination = request.destination else { throw FerryError(.invalidRequest, "download needs a destination") }
        let path = try dataRoot.destinationPath(destination)
        let url = URL(fileURLWithPath: path)
        // A hidden temp file next to the destination: the rename is atomic on one filesystem.
        let temp = url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).ferry-\(request.id).part").path
        let fd = open(temp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw FerryError(.localIOError, "cannot create \(temp): \(String(cString: strerror(errno)))") }
        var committed = false
        defer {
            close(fd)
            if !committed { unlink(temp) }
        }
        progress(TransferProgress(bytesTransferred: 0, totalBytes: nil))
        var attempts = 1
        let attributes = try await policy.run(onRetry: { n, error in
            attempts = n + 1
            self.logger.warning("retrying download", metadata: ["transfer": "\(request.id)", "retry": "\(n)", "error": "\(error)"])
        }) { () async throws(FerryError) -> ObjectAttributes in
            // A retry starts the file over.
            guard ftruncate(fd, 0) == 0 else {
                throw FerryError(.localIOError, "cannot truncate \(temp): \(String(cString: strerror(errno)))")
            }
            return try await store.getObject(bucket: request.bucket, key: job.objectKey, into: fd)
        }
        guard fsync(fd) == 0 else { throw FerryError(.localIOError, "fsync \(temp): \(String(cString: strerror(errno)))") }
        guard rename(temp, path) == 0 else {
            throw FerryError(.localIOError, "cannot move download into place at \(destination): \(String(cString: strerror(errno)))")
        }
        committed = true
        progress(TransferProgress(bytesTransferred: attributes.size, totalBytes: attributes.size))
        return TransferOutcome(object: .init(bucket: request.bucket, key: job.objectKey, size: attributes.size,
                                             eTag: attributes.eTag, versionId: attributes.versionId),
                               eventName: nil, requestId: "", hostId: "", bytesTransferred: attributes.size,
                               attempts: attempts)
    }

    private func delete(_ job: TransferJob, policy: RetryPolicy) async throws(FerryError) -> TransferOutcome {
        let request = job.request
        var attempts = 1
        let result = try await policy.run(onRetry: { n, _ in attempts = n + 1 }) { () async throws(FerryError) -> ObjectWriteResult in
            try await store.deleteObject(bucket: request.bucket, key: job.objectKey)
        }
        return TransferOutcome(object: .init(bucket: request.bucket, key: job.objectKey, versionId: result.versionId),
                               eventName: "ObjectRemoved:Delete", requestId: result.requestId, hostId: result.hostId,
                               bytesTransferred: 0, attempts: attempts)
    }

    private func copy(_ job: TransferJob, policy: RetryPolicy) async throws(FerryError) -> TransferOutcome {
        let request = job.request
        guard let sourceURI = request.source else { throw FerryError(.invalidRequest, "copy needs a source s3://bucket/key") }
        let source = try ObjectLocation(s3URI: sourceURI)
        let destination = ObjectLocation(bucket: request.bucket, key: job.objectKey)
        var attempts = 1
        let result = try await policy.run(onRetry: { n, _ in attempts = n + 1 }) { () async throws(FerryError) -> ObjectWriteResult in
            try await store.copyObject(from: source, to: destination)
        }
        let size = try await store.headObject(bucket: destination.bucket, key: destination.key)?.size
        return TransferOutcome(object: .init(bucket: request.bucket, key: job.objectKey, size: size,
                                             eTag: result.eTag, versionId: result.versionId),
                               eventName: "ObjectCreated:Copy", requestId: result.requestId, hostId: result.hostId,
                               bytesTransferred: size ?? 0, attempts: attempts)
    }
}
