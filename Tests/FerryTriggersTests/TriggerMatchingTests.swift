import FerryTestSupport
import FerryCore
import FerryTriggerKit
import FerryTriggers
import Foundation
import Testing
import Triggers

@Suite struct TriggerMatchingTests {
    struct Recorder: S3EventHandler {
        func handle(_ event: S3Event, context: TriggerContext) async throws {}
    }

    func record(_ name: String, key: String) -> S3Event.Record {
        S3Event.Record(awsRegion: "us-east-1", eventTime: "2026-01-01T00:00:00.000Z", eventName: name,
                       userIdentity: .init(principalId: "p"), requestParameters: .init(sourceIPAddress: "127.0.0.1"),
                       responseElements: .init(requestId: "r", id2: "i"),
                       s3: .init(configurationId: "c", bucket: .init(name: "b", ownerIdentity: .init(principalId: "o")),
                                 object: .init(rawKey: key, size: 1, eTag: "e", sequencer: "01")))
    }

    @Test(arguments: [
        ("ObjectCreated:*", "ObjectCreated:Put", true),
        ("ObjectCreated:*", "ObjectCreated:CompleteMultipartUpload", true),
        ("s3:ObjectCreated:*", "ObjectCreated:Copy", true),
        ("ObjectCreated:*", "s3:ObjectCreated:Put", true),
        ("ObjectCreated:*", "ObjectRemoved:Delete", false),
        ("ObjectCreated:Put", "ObjectCreated:Post", false),
        ("ObjectRemoved:Delete", "ObjectRemoved:Delete", true),
        ("*", "ObjectRemoved:DeleteMarkerCreated", true),
        ("ObjectCreated", "ObjectCreated:Put", false),
    ])
    func eventTypePatterns(pattern: String, event: String, matches: Bool) {
        #expect(EventTypePattern(pattern).matches(event) == matches)
    }

    @Test func prefixAndSuffixFilterTheDecodedKey() {
        let trigger = S3TriggerRegistration(name: "jpg", events: ["ObjectCreated:*"], prefix: "public/my photos/",
                                            suffix: ".jpg", handler: Recorder())
        #expect(trigger.matches(record("ObjectCreated:Put", key: "public/my photos/a b.jpg")))
        #expect(!trigger.matches(record("ObjectCreated:Put", key: "public/my photos/a.png")))
        #expect(!trigger.matches(record("ObjectCreated:Put", key: "private/x/my photos/a.jpg")))
        #expect(!trigger.matches(record("ObjectRemoved:Delete", key: "public/my photos/a.jpg")))
    }

    /// Prefix and suffix match by bytes, as S3's filter rules do: a key whose
    /// first character after the prefix is a combining mark still has that prefix,
    /// and a canonical twin (`e\u{301}` for `é`) of the suffix is not it.
    @Test func prefixAndSuffixMatchByBytes() {
        let trigger = S3TriggerRegistration(name: "accents", events: ["ObjectCreated:*"], prefix: "public/in/", suffix: "é.txt", handler: Recorder())
        #expect(trigger.matches(record("ObjectCreated:Put", key: "public/in/\u{301}café.txt")))
        #expect(!trigger.matches(record("ObjectCreated:Put", key: "public/in/cafe\u{301}.txt")))
        let kelvin = S3TriggerRegistration(name: "k", events: ["*"], prefix: "public/K", handler: Recorder())
        #expect(!kelvin.matches(record("ObjectCreated:Put", key: "public/\u{212A}elvin.txt")))
    }

    @Test func registryRefusesDuplicatesAndEmptyEventLists() throws {
        var registry = TriggerRegistry()
        try registry.register(S3TriggerRegistration(name: "a", events: ["*"], handler: Recorder()))
        #expect(throws: TriggerRegistrationError.self) {
            try registry.register(S3TriggerRegistration(name: "a", events: ["*"], handler: Recorder()))
        }
        #expect(throws: TriggerRegistrationError.self) {
            try registry.register(S3TriggerRegistration(name: "b", events: [], handler: Recorder()))
        }
        #expect(registry.s3Triggers(for: record("ObjectCreated:Put", key: "k")).map(\.name) == ["a"])
    }

    @Test func shippedRegistrationsLoad() throws {
        var registry = TriggerRegistry()
        try Registrations.register(into: &registry, environment: TriggerEnvironment(dataRoot: URL(fileURLWithPath: "/tmp"), outputDirectory: URL(fileURLWithPath: "/tmp"), region: "us-east-1"))
        #expect(registry.s3Triggers.map(\.name).contains("audit-log"))
    }

    /// An audit handler writing to `relative` under a fresh directory (the caller removes it), and a context.
    func auditFixture(_ relative: String) -> (dir: URL, file: URL, handler: AuditLogHandler, context: TriggerContext) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-audit-\(UUID().uuidString)")
        let file = dir.appendingPathComponent(relative)
        let context = TriggerContext.local(handlerName: "audit-log", environment: .init(dataRoot: dir, outputDirectory: dir, region: "us-east-1"))
        return (dir, file, AuditLogHandler(file: file), context)
    }

    @Test func auditHandlerWritesOneLinePerRecord() async throws {
        let (dir, file, handler, context) = auditFixture("audit/audit.jsonl")
        defer { try? FileManager.default.removeItem(at: dir) }
        try await handler.handle(S3Event(records: [record("ObjectCreated:Put", key: "a b+c.txt"),
                                                   record("ObjectRemoved:Delete", key: "z")]), context: context)
        let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
        try #require(lines.count == 2)
        let first = try JSONDecoder().decode(AuditLogHandler.Line.self, from: Data(lines[0].utf8))
        #expect(first.key == "a b+c.txt")
        #expect(first.eventName == "ObjectCreated:Put")
        #expect(first.size == 1)
    }

    /// Seeded: 200 invocations at once, 1–3 records each, into a directory that
    /// does not exist yet (the handler makes it when the open says it is
    /// missing): every record is one intact line.
    @Test func concurrentAuditAppendsStayWholeLines() async throws {
        let (dir, file, handler, context) = auditFixture("audit/deeper/audit.jsonl")
        defer { try? FileManager.default.removeItem(at: dir) }
        var rng = SeededGenerator(seed: 0xA0D17)
        let batches = (0..<200).map { i in
            (0..<Int.random(in: 1...3, using: &rng)).map { "k\(i)-\($0)-" + String(repeating: "x", count: Int.random(in: 0...2000, using: &rng)) }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for keys in batches {
                group.addTask { try await handler.handle(S3Event(records: keys.map { record("ObjectCreated:Put", key: $0) }), context: context) }
            }
            try await group.waitForAll()
        }
        let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
        let keys = try lines.map { try JSONDecoder().decode(AuditLogHandler.Line.self, from: Data($0.utf8)).key }
        #expect(keys.count == batches.joined().count)
        #expect(Set(keys) == Set(batches.joined()))
    }
}

@Suite struct PrefixResolverHookTests {
    /// A resolver that refuses some requests: the refusal carries its code.
    struct TenantPrefixes: PrefixResolver {
        func prefix(for level: AccessLevel, owner identityId: String?) throws(FerryError) -> String {
            guard let owner = identityId, owner.hasPrefix("tenant-") else {
                throw FerryError(.accessDenied, "only tenant identities may use this bucket")
            }
            return "\(owner)/\(level.rawValue)/"
        }
        func area(of key: String) -> ObjectArea? { nil }
    }

    /// Refuses changes by guests: it sees the whole request through `AccessContext`.
    struct SignedInWrites: PrefixResolver {
        let base = DefaultPrefixResolver()
        func prefix(for level: AccessLevel, owner identityId: String?) throws(FerryError) -> String {
            try base.prefix(for: level, owner: identityId)
        }
        func area(of key: String) -> ObjectArea? { base.area(of: key) }
        func prefix(for level: AccessLevel, owner identityId: String?, context: AccessContext) throws(FerryError) -> String {
            if !context.isAuthenticated && context.operation != .download {
                throw FerryError(.accessDenied, "sign in to change objects in \(context.bucket)")
            }
            return try prefix(for: level, owner: identityId)
        }
    }

    @Test func resolversSeeTheRequestContext() throws {
        let policy = AccessPolicy(resolver: SignedInWrites())
        let upload = TransferRequest(id: "u", op: .upload, bucket: "b", key: "k", source: "file:///x")
        #expect(throws: FerryError.self) { try policy.authorize(upload, caller: .anonymousGuest) }
        #expect(try policy.authorize(upload, caller: Caller(role: .authenticated, identityId: "alice")).objectKey == "public/k")
        let read = TransferRequest(id: "d", op: .download, bucket: "b", key: "k", destination: "file:///y")
        #expect(try policy.authorize(read, caller: .anonymousGuest).objectKey == "public/k")
    }

    @Test func shippedHookKeepsTheConfiguredResolver() throws {
        let resolver = Registrations.prefixResolver(configured: PassThroughPrefixResolver())
        #expect(resolver is PassThroughPrefixResolver)
    }

    @Test func customResolversCanRefuse() throws {
        let resolver: any PrefixResolver = TenantPrefixes()
        let ok = TransferRequest(id: "t", op: .delete, bucket: "b", key: "k", identityId: "tenant-7")
        #expect(try resolver.objectKey(for: ok) == "tenant-7/guest/k")
        let refused = TransferRequest(id: "t", op: .delete, bucket: "b", key: "k", identityId: "mallory")
        do {
            _ = try resolver.objectKey(for: refused)
            Issue.record("accepted")
        } catch {
            #expect(error.code == .accessDenied)
        }
    }
}

@Suite struct OverlapTests {
    struct Nop: S3EventHandler { func handle(_ event: S3Event, context: TriggerContext) async throws {} }

    func registration(_ name: String, _ events: [EventTypePattern], prefix: String = "", suffix: String = "") -> S3TriggerRegistration {
        S3TriggerRegistration(name: name, events: events, prefix: prefix, suffix: suffix, handler: Nop())
    }

    /// An event type no event can have is refused, naming the types there are:
    /// a typo, or one S3 has and Ferry never announces, left its trigger silent.
    @Test(arguments: ["ObjectCreated:Pt", "ObjectCreated", "objectcreated:*", "ObjectRestore:*", "s3:ObjectTagging:Put", "Object*", ""])
    func anEventTypeThatIsNeverAnnouncedIsRefused(pattern: String) {
        var registry = TriggerRegistry()
        #expect(throws: TriggerRegistrationError.self) { try registry.register(registration("silent", [EventTypePattern(pattern)])) }
        for known in EventTypePattern.wildcards + EventTypePattern.announced + ["s3:ObjectCreated:*", "s3:ObjectRemoved:Delete"] {
            var fresh = TriggerRegistry()
            #expect(throws: Never.self) { try fresh.register(registration("t", [EventTypePattern(known)])) }
        }
    }

    @Test(arguments: [
        // (a events, a prefix, a suffix, b events, b prefix, b suffix, overlap)
        (["ObjectCreated:*"], "", "", ["ObjectCreated:Put"], "images/", ".jpg", true),
        (["ObjectCreated:*"], "images/", "", ["ObjectCreated:*"], "docs/", "", false),
        (["ObjectCreated:*"], "images/", ".jpg", ["ObjectCreated:*"], "images/", ".png", false),
        (["ObjectCreated:*"], "images/", "", ["ObjectCreated:*"], "images/thumbs/", "", true),
        (["ObjectCreated:Put"], "", "", ["ObjectCreated:Copy"], "", "", false),
        (["ObjectCreated:*"], "", "", ["ObjectRemoved:*"], "", "", false),
        (["*"], "a/", "", ["ObjectRemoved:Delete"], "a/b", "", true),
    ])
    func s3OverlapRule(a: [String], aPrefix: String, aSuffix: String, b: [String], bPrefix: String, bSuffix: String, overlap: Bool) {
        var registry = TriggerRegistry()
        #expect(throws: Never.self) { try registry.register(registration("a", a.map { EventTypePattern($0) }, prefix: aPrefix, suffix: aSuffix)) }
        let second = registration("b", b.map { EventTypePattern($0) }, prefix: bPrefix, suffix: bSuffix)
        if overlap {
            #expect(throws: TriggerRegistrationError.self) { try registry.register(second) }
        } else {
            #expect(throws: Never.self) { try registry.register(second) }
        }
    }
}
