import ArgumentParser
import FerryCore
import FerryS3
import FerryStorage
import Foundation

/// `ferry uploads`: the incomplete multipart uploads under a prefix, and
/// aborting them. Their parts stay stored (and billed) until the upload is
/// completed or aborted; a worker's sweeper aborts its own, but a `ferry cp`
/// whose abort failed too (a store that stayed full, or down) leaves its
/// upload, and its error line names the command that removes it.
struct UploadsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "uploads",
        abstract: "List the incomplete multipart uploads under an s3:// prefix, or abort them.",
        discussion: """
            Lists one upload per line: when it was initiated, its upload id, and its object (quoted for bash).
            --abort needs --upload-id (that one upload) or --older-than (all of them older than that): an upload
            in progress, a worker's or another client's, is never cut by accident.

            Examples:
              ferry uploads s3://media/raw/
              ferry uploads s3://media/raw/video.mp4 --abort --upload-id 2~xq0cT5…
              ferry uploads s3://media --abort --older-than 86400     # every upload started over a day ago
            Exit codes: 0 listed or aborted; 1 an abort failed, or no such upload; 64 bad usage.
            """)

    @Argument(help: "s3://bucket or s3://bucket/prefix (an object's key is a prefix too).") var prefix: String
    @Flag(help: "Abort the uploads selected by --upload-id or --older-than.") var abort = false
    @Option(name: .customLong("upload-id"), help: "The one upload to abort (with --abort).") var uploadId: String?
    @Option(name: .customLong("older-than"), help: "With --abort: every upload initiated more than this many seconds ago.")
    var olderThan: Double?
    @OptionGroup var s3: S3Options

    func validate() throws {
        if abort && uploadId == nil && olderThan == nil {
            throw ValidationError("--abort needs --upload-id ID or --older-than SECONDS (an upload in progress must not be cut by accident)")
        }
        if !abort && (uploadId != nil || olderThan != nil) { throw ValidationError("--upload-id and --older-than select uploads for --abort") }
        if uploadId?.isEmpty == true { throw ValidationError("--upload-id is empty") }
        if let olderThan { try requireRange(olderThan, 0...(100 * 365 * 86_400), "--older-than") }
        _ = try Self.bucketAndPrefix(prefix)
    }

    /// `s3://bucket` or `s3://bucket/prefix`. Only the bucket name is checked: the prefix
    /// is sent as a query parameter, and a prefix may end in `/`, which a key may not.
    static func bucketAndPrefix(_ uri: String) throws -> (bucket: String, prefix: String) {
        guard uri.hasPrefix("s3://") else { throw ValidationError("'\(uri)' is not an s3://bucket[/prefix] URI") }
        let rest = uri.dropFirst(5)
        let bucket = String(rest.prefix { $0 != "/" })
        let prefix = String(rest.dropFirst(bucket.count + 1))
        guard !bucket.isEmpty else { throw ValidationError("'\(uri)' names no bucket") }
        try configured { try ObjectLocation.checkAddress(bucket: bucket, key: nil) }
        return (bucket, prefix)
    }

    func run() async throws {
        let (bucket, keyPrefix) = try Self.bucketAndPrefix(prefix)
        let client = try configured { try s3.client() }
        let uploads: [MultipartUploadSummary]
        do {
            uploads = try await client.listMultipartUploads(bucket: bucket, prefix: keyPrefix)
        } catch {
            throw fail("cannot list the uploads under \(prefix): \(error)")
        }
        guard abort else {
            for upload in uploads { print(line(upload, bucket: bucket)) }
            return
        }
        // Ages by the store's clock, which stamped `initiated`: a store that refused
        // this machine's time as too far off taught the client its own.
        let now = client.clock.now()
        let chosen = uploads.filter { upload in
            if let uploadId { return upload.uploadId == uploadId }
            guard let olderThan, let initiated = upload.initiated else { return false }
            return now.timeIntervalSince(initiated) > olderThan
        }
        if let uploadId, chosen.isEmpty {
            throw fail("no incomplete upload \(uploadId) under \(prefix) (\(uploads.count) there)")
        }
        var failed = 0
        for upload in chosen {
            do {
                try await client.abortMultipartUpload(ObjectLocation(bucket: bucket, key: upload.key), uploadId: upload.uploadId)
                print("aborted \(line(upload, bucket: bucket))")
            } catch {
                failed += 1
                printError("cannot abort upload \(ShellWord.quoted(upload.uploadId)) of \(ShellWord.quoted("s3://\(bucket)/\(upload.key)")): \(error)")
            }
        }
        let unknownAge = uploads.filter { $0.initiated == nil }.count
        printError("aborted \(chosen.count - failed) of \(uploads.count) incomplete uploads under \(prefix)"
            + (failed > 0 ? "; \(failed) failed" : "")
            + (olderThan != nil && unknownAge > 0 ? "; \(unknownAge) of unknown age left" : ""))
        if failed > 0 { throw ExitCode(FerryExit.transferNotCompleted) }
    }

    private func line(_ upload: MultipartUploadSummary, bucket: String) -> String {
        let initiated = upload.initiated.map(Timestamp.iso8601) ?? "-"
        return "\(initiated)\t\(ShellWord.quoted(upload.uploadId))\t\(ShellWord.quoted("s3://\(bucket)/\(upload.key)"))"
    }

    private func fail(_ message: String) -> ExitCode {
        printError(message)
        return ExitCode(FerryExit.transferNotCompleted)
    }
}
