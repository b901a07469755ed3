import ArgumentParser
import FerryClient
import FerryCore
import Foundation
import Logging

struct EnqueueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enqueue",
        abstract: "Send a transfer request to Ferry and print its id; with --wait, follow it to the end.",
        discussion: """
            A local path for --source/--destination becomes a file:// URI (it must be under the workers' data root).

            Examples:
              ferry enqueue upload --bucket photos --key cat.jpg --source /srv/ferry/in/cat.jpg --wait
              ferry enqueue download --bucket photos --key cat.jpg --destination /srv/ferry/out/cat.jpg
              ferry enqueue delete --bucket photos --key cat.jpg --access-level private --identity-id alice
              ferry enqueue copy --bucket photos --key copy.jpg --source s3://photos/public/cat.jpg
              ferry enqueue upload --bucket media --key raw.mov --source /srv/ferry/in/raw.mov --part-size 64MiB --part-concurrency 8
            Exit codes: 0 enqueued (or completed, with --wait); 1 ended failed/cancelled/rejected; 3 --timeout passed; 64 bad usage.
            """)

    @Argument(help: "upload, download, delete or copy.")
    var op: String

    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var log: LogOptions

    @Option(help: "Bucket.") var bucket: String
    @Option(help: "Key, before the access-level prefix.") var key: String
    @Option(help: "Upload source: a path, file:///…, data:…, https://…; copy source: s3://bucket/key.") var source: String?
    @Option(help: "Download destination: a path or file:///….") var destination: String?
    @Option(help: "Transfer id (idempotency key; default a new UUID).") var id: String?
    @Option(name: .customLong("access-level"), help: "guest, protected or private (default guest).") var accessLevel: String?
    @Option(name: .customLong("identity-id"), help: "Who acts.") var identityId: String?
    @Option(name: .customLong("target-identity-id"), help: "Owner of a protected object being read.") var targetIdentityId: String?
    @Option(name: .customLong("source-access-level"), help: "Copy: the source's level; its key in --source is then a user key.") var sourceAccessLevel: String?
    @Option(name: .customLong("source-identity-id"), help: "Copy: the owner of a protected or private source.") var sourceIdentityId: String?
    @Option(name: .customLong("content-type"), help: "Content type (default from the file extension).") var contentType: String?
    @Option(name: .customLong("metadata"), parsing: .singleValue, help: "User metadata NAME=VALUE (repeatable).") var metadata: [String] = []
    @Option(name: .customLong("header"), parsing: .singleValue,
            help: "An allow-listed S3 header, 'NAME: VALUE' (repeatable): cache-control, content-disposition, SSE-S3/KMS, SSE-C keys, ….")
    var header: [String] = []
    @OptionGroup(title: "Transfer options (the request's options object)") var transfer: RequestOptionFlags
    @Option(help: "Identity proof for workers with --auth-mode jwt (env FERRY_AUTH_TOKEN).") var auth: String?
    @Option(help: "Where the terminal status is also delivered: kafka:<topic> or an https URL (the worker signs the POST).")
    var callback: String?
    @Flag(name: .customLong("through-kafka"),
          help: "Upload: read --source here and send its bytes through Kafka (a claim check on <prefix>.uploads), for workers that cannot read the file.")
    var throughKafka = false
    @Flag(help: "Follow the transfer's statuses until it ends.") var wait = false
    @Option(help: "With --wait: give up after this many seconds (default 600).") var timeout: Double = 600

    func validate() throws { try requireRange(timeout, waitSeconds, "--timeout") }

    func run() async throws {
        let logger = try log.bootstrap(label: "ferry.enqueue")
        guard let operation = TransferOperation(rawValue: op) else {
            throw ValidationError("unknown operation '\(op)': use upload, download, delete or copy")
        }
        var request = try makeRequest(operation)
        var bytes: [UInt8]?
        if throughKafka {
            guard operation == .upload, let source else { throw ValidationError("--through-kafka needs an upload with --source") }
            let data = try CommandLineFile.data(source.hasPrefix("file://") ? URL(string: source)?.path ?? source : source)
            bytes = Array(data)
            // Checked as a worker will see it; the real positions replace this placeholder.
            request.source = ChunkedSource(topic: kafka.topics.uploads, size: Int64(data.count), sha256: String(repeating: "0", count: 64),
                                           chunkSize: ChunkedSource.maxChunkBytes,
                                           positions: Array(repeating: .init(partition: 0, offset: 0),
                                                            count: (data.count + ChunkedSource.maxChunkBytes - 1) / ChunkedSource.maxChunkBytes)).uri
        }
        if let problem = RequestDecoder.validate(request) { throw ValidationError(problem.message) }
        let configuration = try kafka.configuration()
        let client = try TransferClient(bootstrapServers: configuration.properties["bootstrap.servers"]!,
                                        properties: try kafka.properties(), topics: kafka.topics,
                                        deliveryTimeout: KafkaOptions.commandDeliveryTimeout, logger: logger)
        guard wait else {
            if let bytes { try await client.uploadData(bytes, request) } else { try await client.enqueue(request) }
            print(request.id)
            return
        }
        // Out at once, not when the wait ends: the id is what cancels or follows the transfer.
        print(request.id)
        flushStandardOutput()
        let display = ProgressDisplay(label: "\(op) \(bucket)/\(key)")
        let final: TransferStatus
        do {
            if let bytes {
                try await client.uploadData(bytes, request)
                final = try await client.result(of: request.id, timeout: timeout) { display.show($0) }
            } else {
                final = try await client.run(request, timeout: timeout) { display.show($0) }
            }
        } catch TransferClientError.timedOut {
            display.fail(message: "timed out after \(timeout.clampedInt()) s waiting for \(request.id)")
            throw ExitCode(FerryExit.timedOut)
        }
        if final.state != .completed { throw ExitCode(FerryExit.transferNotCompleted) }
    }

    func makeRequest(_ operation: TransferOperation) throws -> TransferRequest {
        let pairs = try NameValuePairs.parse(metadata, option: "--metadata")
        var level: AccessLevel?
        if let accessLevel {
            guard let parsed = AccessLevel(rawValue: accessLevel) else {
                throw ValidationError("--access-level must be guest, protected or private")
            }
            level = parsed
        }
        var sourceLevel: AccessLevel?
        if let sourceAccessLevel {
            guard let parsed = AccessLevel(rawValue: sourceAccessLevel) else {
                throw ValidationError("--source-access-level must be guest, protected or private")
            }
            sourceLevel = parsed
        }
        return TransferRequest(
            id: id ?? UUID().uuidString.lowercased(), op: operation, bucket: bucket, key: Self.objectKey(key, source: source, operation),
            accessLevel: level,
            identityId: identityId, targetIdentityId: targetIdentityId,
            source: source.map { operation == .copy || throughKafka ? $0 : Self.uri($0) },
            destination: destination.map { Self.uri(CopyDestination.path($0, sourceName: CopyDestination.name(of: key), existingDirectory: false)) },
            contentType: contentType, metadata: pairs.isEmpty ? nil : pairs, headers: try RequestHeaders.parse(header),
            options: try transfer.options(),
            auth: auth ?? environment("FERRY_AUTH_TOKEN"), sourceAccessLevel: sourceLevel, sourceIdentityId: sourceIdentityId,
            callback: callback)
    }

    /// A key ending in `/` names a folder: an upload of a local file or a copy
    /// of an object lands there under the source's own name, as with `ferry cp`.
    /// Other sources (`data:`, `https://`) have no name to take; such a key is
    /// then refused by the key rule, with its reason.
    static func objectKey(_ key: String, source: String?, _ operation: TransferOperation) -> String {
        guard key.hasSuffix("/"), let source, operation == .upload || operation == .copy else { return key }
        return CopyDestination.name(ofSource: source).map { key + $0 } ?? key
    }

    /// A local path becomes an absolute file:// URI; URIs pass unchanged.
    static func uri(_ pathOrURI: String) -> String {
        if pathOrURI.contains("://") || pathOrURI.hasPrefix("data:") { return pathOrURI }
        return URL(fileURLWithPath: pathOrURI).standardizedFileURL.absoluteString
    }
}
