import ArgumentParser
import FerryCore
import FerryEngine
import FerryS3
import FerryStorage
import Foundation
import Synchronization
import FerryConcurrency

/// `ferry cp --recursive`: every file under a directory to a prefix, or every
/// object under a prefix to a directory, up to the engine's `maxTransfers` at once.
struct RecursiveCopy {
    enum Direction { case upload(directory: URL, target: ObjectLocation), download(prefix: ObjectLocation, directory: URL) }
    let direction: Direction
    /// What every object's request carries: `--header` (SSE-C keys also on downloads), and for uploads
    /// `--metadata` and `--content-type`.
    var headers: [String: String]?
    var metadata: [String: String]?
    var contentType: String?

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

    /// Runs the copies, up to twice the engine's transfers at once (a download
    /// that has all its bytes gives its place to the next while its checks
    /// finish). Objects are listed a page at a time, and a directory tree is
    /// read a directory at a time, while the copies run; each transfer is made
    /// when a place is free: memory follows the places, not the number of
    /// objects. What cannot be copied (an unreadable directory, a key that
    /// names no path, a listing that broke off) fails the copy; what is left
    /// out by rule (links, FIFOs and the like) is said, not failed.
    func run(engine: TransferEngine, client: S3Client) async throws {
        let started = Date()
        let tally = Tally()
        let limit = 2 * engine.configuration.maxTransfers
        let breaker = StorageBreaker { () async throws(FerryError) in try await client.probe() }
        let copy: @Sendable (TransferJob) async -> Void = { job in
            guard let control = breaker.enroll() else {
                tally.notCopied.add(1, ordering: .relaxed)
                return
            }
            defer { breaker.release(control) }
            do throws(FerryError) {
                let outcome = try await engine.run(job, control: control, outageCheck: breaker)
                tally.copied.add(1, ordering: .relaxed)
                tally.bytes.add(outcome.bytesTransferred, ordering: .relaxed)
            } catch {
                if await breaker.confirmsOutage(error) {
                    tally.notCopied.add(1, ordering: .relaxed)
                } else {
                    tally.fail("\(job.request.key): \(error)")
                }
            }
        }
        switch direction {
        case .upload(let directory, let target):
            let found = Atomic<Int>(0)
            let jobs = try DirectoryWalk.open(directory.path).compactMap { entry -> TransferJob? in
                switch entry {
                case .file(let relative):
                    let key = target.key + relative
                    // isDirectory: false spares Foundation a stat to find out.
                    let source = URL(fileURLWithPath: directory.path + "/" + relative, isDirectory: false).absoluteString
                    let index = found.add(1, ordering: .relaxed).oldValue
                    return TransferJob(request: TransferRequest(id: "cp-\(index)", op: .upload, bucket: target.bucket, key: key,
                                                                source: source, contentType: contentType, metadata: metadata,
                                                                headers: headers), objectKey: key)
                case .skipped(let path, let reason):
                    printError("\(path): not copied: \(reason)")
                case .unreadable(let path, let reason):
                    tally.fail("\(path)/: not read: \(reason)")
                }
                return nil
            }
            await forEachConcurrently(jobs, limit: limit, copy)
        case .download(let prefix, let directory):
            let listed = Atomic<Int>(0)
            let jobs = client.objects(bucket: prefix.bucket, prefix: prefix.key).compactMap { object -> TransferJob? in
                let index = listed.add(1, ordering: .relaxed).oldValue
                if FolderMarker.isMarker(object) {
                    if let failure = await FolderMarker.make(key: object.key, prefix: prefix.key, in: directory) {
                        tally.fail(failure)
                    } else {
                        tally.folders.add(1, ordering: .relaxed)
                    }
                    return nil
                }
                // A key another client stored with `..` or empty segments would map to a path
                // outside the directory: such objects are skipped, and said so.
                if let problem = ObjectKeyRule.violation(of: object.key) {
                    tally.fail("\(object.key.debugDescription): not copied: \(problem.message)")
                    return nil
                }
                let path = directory.appendingPathComponent(String(object.key.dropFirst(prefix.key.count)))
                return TransferJob(request: TransferRequest(id: "cp-\(index)", op: .download, bucket: prefix.bucket, key: object.key,
                                                            destination: path.absoluteString, headers: headers), objectKey: object.key)
            }
            do {
                try await forEachConcurrently(jobs, limit: limit, copy)
            } catch {
                tally.fail("listing s3://\(prefix.bucket)/\(prefix.key) broke off after \(listed.load(ordering: .relaxed)) objects: \(error)")
            }
        }
        let seconds = max(Date().timeIntervalSince(started), 0.001)
        let moved = tally.bytes.load(ordering: .relaxed)
        let failed = tally.failures.withLock { $0 }
        let copied = tally.copied.load(ordering: .relaxed)
        let folders = tally.folders.load(ordering: .relaxed)
        print(String(format: "%d objects%@, %@ in %.2f s (%.1f objects/s, %.1f MiB/s)%@", copied,
                     folders == 0 ? "" : " and \(folders) folder\(folders == 1 ? "" : "s")", ProgressDisplay.bytes(moved), seconds, Double(copied) / seconds,
                     Double(moved) / 1_048_576 / seconds, failed.count == 0 ? "" : ", \(failed.count) failed"))
        for failure in failed.shown { printError("failed: \(failure)") }
        if let reason = breaker.reason {
            let left = tally.notCopied.load(ordering: .relaxed)
            printError("stopped: the store gives no answer (\(reason)); \(left) more not copied. Run the same command again once it answers.")
            throw ExitCode(FerryExit.transferNotCompleted)
        }
        if failed.count > 0 { throw ExitCode(FerryExit.transferNotCompleted) }
    }
}

/// Totals of a recursive copy, shared by its tasks.
private final class Tally: Sendable {
    let bytes = Atomic<Int64>(0)
    let copied = Atomic<Int>(0)
    /// Folder markers made into directories (downloads).
    let folders = Atomic<Int>(0)
    /// Files or objects not copied because the store stopped answering (see StorageBreaker).
    let notCopied = Atomic<Int>(0)
    /// Every failure counted, the first 20 kept to print: a prefix of millions
    /// of unusable keys must not grow the process with their messages.
    let failures = Mutex((count: 0, shown: [String]()))
    func fail(_ reason: String) {
        failures.withLock { failures in
            if failures.shown.count < 20 { failures.shown.append(reason) }
            failures.count += 1
        }
    }
}

/// A zero-byte key ending in `/` is a folder marker (what the AWS console's
/// "Create folder" stores): a download makes it an empty directory, as aws-cli
/// and rclone leave such keys out rather than fail on them; it has no bytes.
enum FolderMarker {
    static func isMarker(_ object: S3Client.ListedObject) -> Bool { object.size == 0 && object.key.hasSuffix("/") }

    /// Makes the directory; returns why not, for the copy's failures.
    static func make(key: String, prefix: String, in directory: URL) async -> String? {
        // The prefix's own marker is the directory itself; any other must pass the
        // key rule without its slash, so that it names a path inside the directory.
        if key != prefix, let problem = ObjectKeyRule.violation(of: String(key.dropLast())) {
            return "\(key.debugDescription): not copied: \(problem.message)"
        }
        let path = key == prefix ? directory
            : directory.appendingPathComponent(String(key.dropFirst(prefix.count).dropLast()), isDirectory: true)
        return await BlockingPool.shared.run { () -> String? in
            do {
                try FileManager.default.createDirectory(at: path, withIntermediateDirectories: true)
                return nil
            } catch {
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: path.path, isDirectory: &isDirectory), !isDirectory.boolValue {
                    return "\(key.debugDescription): folder not made: \(path.path) exists and is not a directory"
                }
                return "\(key.debugDescription): folder not made at \(path.path): \(error.localizedDescription)"
            }
        }
    }
}
