import ArgumentParser
import FerryCore
import FerryEngine
import FerryS3
import FerryStorage
import Foundation
import Logging
import Synchronization

struct CopyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cp",
        abstract: "Copy a file to or from S3, or an object within S3, with Ferry's transfer engine (no Kafka).",
        discussion: """
            Examples:
              ferry cp ./video.mp4 s3://media/raw/video.mp4 --part-size 16MiB --part-concurrency 8
              ferry cp s3://media/raw/video.mp4 /tmp/video.mp4
              ferry cp s3://media/raw/video.mp4 s3://archive/video.mp4
              AWS_PROFILE=prod ferry cp report.pdf s3://docs/report.pdf --content-type application/pdf --metadata owner=alice
              ferry cp --recursive ./photos s3://media/photos/ --max-transfers 32     # every file under ./photos
              ferry cp --recursive s3://media/photos/ ./restore --max-transfers 16    # every object under the prefix
            Exit codes: 0 copied; 1 a transfer failed; 64 bad usage.
            """)

    @Argument(help: "Source: a local path or s3://bucket/key.") var source: String
    @Argument(help: "Destination: a local path or s3://bucket/key.") var destination: String
    @OptionGroup var s3: S3Options
    @OptionGroup var log: LogOptions
    @Option(name: .customLong("content-type"), help: "Content type of an upload (default from the extension).") var contentType: String?
    @Option(name: .customLong("metadata"), parsing: .singleValue, help: "User metadata NAME=VALUE (repeatable).") var metadata: [String] = []
    @Option(name: .customLong("header"), parsing: .singleValue,
            help: "An allow-listed S3 header, 'NAME: VALUE' (repeatable): cache-control, SSE-S3/KMS, SSE-C keys (also for downloads), ….")
    var header: [String] = []
    @Flag(help: "Print only the final line.") var quiet = false
    @Flag(name: .customLong("fsync"), help: "Flush each downloaded file to disk before it is renamed into place (the worker always does).")
    var fsync = false
    @Flag(name: .customLong("recursive"), help: "Copy a directory to a prefix, or a prefix to a directory (folder markers, zero-byte keys ending in /, become empty directories).") var recursive = false
    @Option(name: .customLong("max-transfers"), help: "Objects copied at once with --recursive (default 8).") var maxTransfers = 8

    func validate() throws {
        // aws s3 cp reads '-' as standard input or output. Ferry streams neither, and a file named '-' in
        // the working directory is never what was meant.
        for (argument, role) in [(source, "source"), (destination, "destination")] where argument == "-" {
            throw ValidationError("'-' as the \(role): ferry cp does not stream standard input or output; name a file (./- for a file named '-')")
        }
    }

    func run() async throws {
        var logOptions = log
        logOptions.level = log.level ?? environment("FERRY_LOG_LEVEL") ?? "warning"
        let logger = try logOptions.bootstrap(label: "ferry.cp")
        defer { logLanes(logger) }
        let client = try configured { try s3.client() }
        var settings = try s3.limits.settings()
        settings.syncDownloads = fsync
        try requireRange(maxTransfers, 1...4096, "--max-transfers")
        var configuration = TransferEngine.Configuration()
        configuration.maxTransfers = recursive ? maxTransfers : 1
        configuration.defaults = settings
        let engine = TransferEngine(store: client, dataRoot: try configured { try DataRoot("/") }, configuration: configuration,
                                    logger: logger)
        if recursive {
            var copy = try configured { try RecursiveCopy(source: source, destination: destination) }
            let pairs = try NameValuePairs.parse(metadata, option: "--metadata")
            copy.headers = try RequestHeaders.parse(header)
            copy.metadata = pairs.isEmpty ? nil : pairs
            copy.contentType = contentType
            try await copy.run(engine: engine, client: client)
            return
        }

        let (job, label) = try configured(makeJob)
        let display = ProgressDisplay(label: label)
        let started = Date()
        let lastDraw = LockedDate()
        do {
            let outcome = try await engine.run(job) { progress in
                guard !quiet, lastDraw.due(every: 0.2) else { return }
                display.show(TransferStatus(id: job.request.id, op: job.request.op.rawValue, state: .running,
                                            bytesTransferred: progress.bytesTransferred, totalBytes: progress.totalBytes))
            }
            let seconds = max(Date().timeIntervalSince(started), 0.001)
            let bytes = outcome.bytesTransferred
            display.finish(message: String(format: "%@: %@ in %.2f s (%.1f MiB/s)%@", label, ProgressDisplay.bytes(bytes), seconds,
                                           Double(bytes) / 1_048_576 / seconds, outcome.object.eTag.map { ", eTag \($0)" } ?? ""))
        } catch {
            display.fail(message: "\(label) failed: \(error)")
            throw ExitCode(FerryExit.transferNotCompleted)
        }
    }

    /// How full the MD5 lanes of downloads ran, and the downloads still
    /// announced to them, none once every download has ended (`--log-level debug`).
    private func logLanes(_ logger: Logger) {
        let lanes = MD5Lanes.shared
        let (batches, announced) = (lanes.statistics.batches, lanes.announcedCount)
        guard batches > 0 || announced > 0 else { return }
        let perBatch = String(format: "%.2f", lanes.filesPerBatch ?? 0)
        logger.debug("MD5 of downloads: \(batches) batches, \(perBatch) files per batch; \(announced) downloads still announced")
    }

    func makeJob() throws -> (TransferJob, String) {
        let id = "cp-\(UUID().uuidString.lowercased())"
        let pairs = try NameValuePairs.parse(metadata, option: "--metadata")
        let headers = try RequestHeaders.parse(header)
        guard !destination.isEmpty else { throw ValidationError("the destination is empty") }
        // What only --recursive copies, said before anything is tried.
        var isDirectory: ObjCBool = false
        if !source.hasPrefix("s3://"), FileManager.default.fileExists(atPath: source, isDirectory: &isDirectory), isDirectory.boolValue {
            throw ValidationError("'\(source)' is a directory: copy it with --recursive")
        }
        if source.hasPrefix("s3://"), source.hasSuffix("/") {
            throw ValidationError("'\(source)' names a prefix, not an object: copy it with --recursive")
        }
        let sourceName = CopyDestination.name(ofSource: source)
        switch (source.hasPrefix("s3://"), destination.hasPrefix("s3://")) {
        case (false, true):
            let destination = CopyDestination.object(destination, sourceName: sourceName)
            let target = try ObjectLocation(s3URI: destination)
            let request = TransferRequest(id: id, op: .upload, bucket: target.bucket, key: target.key,
                                          source: EnqueueCommand.uri(source), contentType: contentType,
                                          metadata: pairs.isEmpty ? nil : pairs, headers: headers)
            return (TransferJob(request: request, objectKey: target.key), "upload \(source) → \(destination)")
        case (true, false):
            let object = try ObjectLocation(s3URI: source)
            let destination = CopyDestination.path(destination, sourceName: sourceName, existingDirectory: true)
            let request = TransferRequest(id: id, op: .download, bucket: object.bucket, key: object.key,
                                          destination: EnqueueCommand.uri(destination), headers: headers)
            return (TransferJob(request: request, objectKey: object.key), "download \(source) → \(destination)")
        case (true, true):
            let destination = CopyDestination.object(destination, sourceName: sourceName)
            let target = try ObjectLocation(s3URI: destination)
            let request = TransferRequest(id: id, op: .copy, bucket: target.bucket, key: target.key, source: source, headers: headers)
            return (TransferJob(request: request, objectKey: target.key), "copy \(source) → \(destination)")
        case (false, false):
            throw ValidationError("one side must be s3://bucket/key")
        }
    }
}

/// Rate-limits progress drawing from transport threads.
final class LockedDate: Sendable {
    private let last = Mutex(Date.distantPast)
    func due(every seconds: Double) -> Bool {
        let now = Date()
        return last.withLock { last in
            guard now.timeIntervalSince(last) >= seconds else { return false }
            last = now
            return true
        }
    }
}
