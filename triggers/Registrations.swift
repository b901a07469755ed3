import FerryTriggerKit

/// The one place where trigger handlers are registered. Ferry calls this at
/// start-up; a registration that cannot work stops start-up with its reason.
/// See triggers/README.md for how to add a handler.
public enum Registrations {
    /// The key-prefix resolver the worker uses: return `configured` (set by the
    /// `--prefix-*` flags, Amplify's layout by default) or your own
    /// `PrefixResolver`, which may also refuse requests (Amplify's client-side
    /// validation, enforced server-side).
    public static func prefixResolver(configured: any PrefixResolver) -> any PrefixResolver {
        configured
    }

    public static func register(into registry: inout TriggerRegistry, environment: TriggerEnvironment) throws {
        try registry.register(S3TriggerRegistration(
            name: "audit-log",
            events: ["ObjectCreated:*", "ObjectRemoved:*"],
            delivery: AsyncDelivery(maximumRetryAttempts: 2),
            // It covers every key, so any S3 trigger declared in configuration would overlap it: it steps aside.
            yieldsToOverlaps: true,
            handler: AuditLogHandler(file: environment.outputDirectory.appendingPathComponent("audit/audit.jsonl"))
        ))
        // A queryable catalog of every object, from the `objects` table's stream.
        try registry.register(StreamTriggerRegistration(
            name: "object-index",
            table: "objects",
            viewType: .newImage,
            mapping: EventSourceMapping(batchSize: 100, maximumBatchingWindowSeconds: 0.1, maximumRetryAttempts: 10,
                                        reportBatchItemFailures: true),
            handler: try ObjectIndexHandler(file: environment.outputDirectory.appendingPathComponent("index/objects.sqlite"))
        ))
        // A SHA-256 manifest under manifests/ for each object written under incoming/ (guest level).
        // The filter keeps the manifests themselves out: they are written outside the watched prefix.
        try registry.register(StreamTriggerRegistration(
            name: "checksum-manifest",
            table: "objects",
            viewType: .newImage,
            mapping: EventSourceMapping(
                batchSize: 10, maximumRetryAttempts: 3, maximumRecordAgeSeconds: 3600, bisectBatchOnFunctionError: true,
                reportBatchItemFailures: true,
                filterCriteria: try FilterCriteria(patterns: [
                    #"{"eventName":["INSERT","MODIFY"],"dynamodb":{"Keys":{"key":{"S":[{"prefix":"public/incoming/"}]}}}}"#,
                ])),
            handler: ChecksumManifestHandler(watchedPrefix: "public/incoming/", manifestPrefix: "manifests/")
        ))
        // A feed line for every change of a post, from the `posts` record table's stream
        // (a table the workers declare: `ferry dev` does, `ferry worker` with `--table posts:id:delete-files`).
        try registry.register(StreamTriggerRegistration(
            name: "post-feed",
            table: "posts",
            viewType: .newAndOldImages,
            mapping: EventSourceMapping(batchSize: 50, maximumBatchingWindowSeconds: 0.1, maximumRetryAttempts: 5),
            handler: PostFeedHandler(file: environment.outputDirectory.appendingPathComponent("feed/posts.jsonl"))
        ))
    }
}
