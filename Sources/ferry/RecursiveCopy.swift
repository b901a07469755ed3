import ArgumentParser
import FerryCore
import FerryEngine
import FerryS3
import Foundation
import Synchronization

/// `ferry cp --recursive`: every file under a directory to a prefix, or every
/// object under a prefix to a directory, up to the engine's `maxTransfers` at once.
struct RecursiveCopy {
    enum Direction { case upload(directory: URL, target: ObjectLocation), download(prefix: ObjectLocation, directory: URL) }
    let direction: Direction

    init(source: String, destination: String) throws {
        switch (source.hasPrefix("s3://"), destination.hasPrefix("s3://")) {
        case (false, true):
            direction = .upload(directory: URL(fileURLWithPath: source).standardizedFileURL, target: try Self.prefix(destination))
        case (true, false):
            direction = .download(prefix: try Self.prefix(source), directory: URL(fileURLWithPath: destination).standardizedFileURL)
        default:
            throw ValidationError("--recursive copies a directory to s3://bucket/prefix/ or back")
        }
    }

    /// `s3://bucket/prefix/` (the prefix may be empty).
    static func prefix(_ uri: String) throws -> ObjectLocation {
        let rest = uri.dropFirst(5)
        let bucket = rest.prefix { $0 != "/" }
        guard !bucket.isEmpty else { throw ValidationError("'\(uri)' names no bucket") }
        var key = String(rest.dropFirst(bucket.count + 1))
        if !key.isEmpty && !key.hasSuffix("/") { key += "/" }
        // Keys under the prefix must pass the key rule, so the prefix must too.
        if let problem = RequestLimits.bucketNameProblem(String(bucket)) ?? (key.isEmpty ? nil : ObjectKeyRule.violation(of: key + "x", field: "prefix")) {
            throw ValidationError(problem.message)
        }
        return ObjectLocation(bucket: String(bucket), key: key)
    }

    /// The transfers to run; what was found but cannot be copied (the copy fails
    /// for these: an unreadable directory, an object whose key names no path);
    /// and what is left out by rule (links, FIFOs and the like: said, not failed).
    func jobs(client: S3Client) async throws -> (jobs: [TransferJob], skipped: [String], leftOut: [String]) {
        switch direction {
        case .upload(let directory, let target):
            let walk = try DirectoryWalk.regularFiles(under: directory.path)
            let jobs = walk.files.enumerated().map { index, relative in
                let key = target.key + relative
                // isDirectory: false spares Foundation a stat to find out.
                let source = URL(fileURLWithPath: directory.path + "/" + relative, isDirectory: false).absoluteString
                return TransferJob(request: TransferRequest(id: "cp-\(index)", op: .upload, bucket: target.bucket, key: key,
                                                            source: source), objectKey: key)
            }
            return (jobs, walk.unreadable.map { "\($0.path)/: not read: \($0.reason)" },
                    walk.skipped.map { "\($0.path): not copied: \($0.reason)" })
        case .download(let prefix, let directory):
            let objects = try await client.listObjects(bucket: prefix.bucket, prefix: prefix.key)
            var jobs: [TransferJob] = []
            var skipped: [String] = []
            for (index, object) in objects.enumerated() {
                // A key another client stored with `..` or empty segments would map to a path
                // outside the directory: such objects are skipped, and said so.
                if let problem = ObjectKeyRule.violation(of: object.key) {
                    skipped.append("\(object.key.debugDescription): not copied: \(problem.message)")
                    continue
                }
                let path = directory.appendingPathComponent(String(object.key.dropFirst(prefix.key.count)))
                jobs.append(TransferJob(request: TransferRequest(id: "cp-\(index)", op: .download, bucket: prefix.bucket, key: object.key,
                                                                 destination: path.absoluteString), objectKey: object.key))
            }
            return (jobs, skipped, [])
        }
    }



    func run(engine: TransferEngine, client: S3Client) async throws {
        let (jobs, skipped, leftOut) = try await self.jobs(client: client)
        for entry in leftOut { FileHandle.standardError.write(Data("\(entry)\n".utf8)) }
        let started = Date()
        let tally = Tally()
        // Twice the engine's transfers: a download that has all its bytes gives its
        // place to the next while its checks finish, so up to that many run.
        await forEachConcurrently(jobs, limit: 2 * engine.configuration.maxTransfers) { job in
            do {
                let outcome = try await engine.run(job)
                tally.bytes.add(outcome.bytesTransferred, ordering: .relaxed)
            } catch {
                tally.failures.withLock { $0.append("\(job.request.key): \(error)") }
            }
        }
        let seconds = max(Date().timeIntervalSince(started), 0.001)
        let moved = tally.bytes.load(ordering: .relaxed)
        let failed = tally.failures.withLock { $0 } + skipped
        let copied = jobs.count - tally.failures.withLock { $0.count }
        print(String(format: "%d objects, %@ in %.2f s (%.1f objects/s, %.1f MiB/s)%@", copied,
                     ProgressDisplay.bytes(moved), seconds, Double(copied) / seconds,
                     Double(moved) / 1_048_576 / seconds, failed.isEmpty ? "" : ", \(failed.count) failed"))
        for failure in failed.prefix(20) { FileHandle.standardError.write(Data("failed: \(failure)\n".utf8)) }
        if !failed.isEmpty { throw ExitCode(FerryExit.transferNotCompleted) }
    }
}

/// Totals of a recursive copy, shared by its tasks.
private final class Tally: Sendable {
    let bytes = Atomic<Int64>(0)
    let failures = Mutex<[String]>([])
}
