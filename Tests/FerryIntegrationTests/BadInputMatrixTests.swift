import FerryCore
import FerryKafka
import FerryTestSupport
import Foundation
import Testing

/// Bad input never crashes a worker and never loses a message: each case below
/// is dead-lettered with its original bytes and its specific code, gets a
/// `rejected` status when its id can be read, writes no object and touches no
/// file; the worker keeps running and commits past all of them.
@Suite(.serialized) struct BadInputMatrixTests {
    struct Case {
        var name: String
        var message: String
        var code: String
        var id: String?
        /// Values the DLQ record must carry as `<redacted>` (everything else is the original).
        var secrets: [String] = []
    }

    static func cases(root: URL) -> [Case] {
        let data = root.appendingPathComponent("data")
        let inside = data.appendingPathComponent("in/ok.txt").absoluteString
        let escape = data.appendingPathComponent("in/escape-link").absoluteString
        let longKey = String(repeating: "k", count: 1100)
        let bigMeta = String(repeating: "m", count: 3000)
        func up(_ id: String, _ extra: String, source: String? = nil) -> String {
            #"{"id":"\#(id)","op":"upload","bucket":"matrix","key":"\#(id).txt","source":"\#(source ?? inside)"\#(extra)}"#
        }
        func down(_ id: String, _ destination: String, _ extra: String = "") -> String {
            #"{"id":"\#(id)","op":"download","bucket":"matrix","key":"x.txt","destination":"\#(destination)"\#(extra)}"#
        }
        return [
            Case(name: "not-json", message: "{", code: "MalformedRequest"),
            Case(name: "array", message: "[1,2,3]", code: "MalformedRequest"),
            Case(name: "text", message: "upload please", code: "MalformedRequest"),
            Case(name: "null", message: "null", code: "MalformedRequest"),
            Case(name: "id-number", message: #"{"id":7,"op":"delete","bucket":"matrix","key":"k"}"#, code: "InvalidRequest"),
            Case(name: "op-number", message: #"{"id":"m6","op":1,"bucket":"matrix","key":"k"}"#, code: "InvalidRequest", id: "m6"),
            Case(name: "op-unknown", message: #"{"id":"m7","op":"explode","bucket":"matrix","key":"k"}"#, code: "UnsupportedOperation", id: "m7"),
            Case(name: "no-id", message: #"{"op":"delete","bucket":"matrix","key":"k"}"#, code: "InvalidRequest"),
            Case(name: "no-op", message: #"{"id":"m9","bucket":"matrix","key":"k"}"#, code: "InvalidRequest", id: "m9"),
            Case(name: "no-bucket", message: #"{"id":"m10","op":"delete","key":"k"}"#, code: "InvalidRequest", id: "m10"),
            Case(name: "no-key", message: #"{"id":"m11","op":"delete","bucket":"matrix"}"#, code: "InvalidRequest", id: "m11"),
            Case(name: "upload-no-source", message: #"{"id":"m12","op":"upload","bucket":"matrix","key":"k"}"#, code: "InvalidRequest", id: "m12"),
            Case(name: "download-no-dest", message: #"{"id":"m13","op":"download","bucket":"matrix","key":"k"}"#, code: "InvalidRequest", id: "m13"),
            Case(name: "copy-no-source", message: #"{"id":"m14","op":"copy","bucket":"matrix","key":"k"}"#, code: "InvalidRequest", id: "m14"),
            Case(name: "id-chars", message: #"{"id":"a b","op":"delete","bucket":"matrix","key":"k"}"#, code: "InvalidRequest"),
            Case(name: "id-long", message: #"{"id":"\#(String(repeating: "i", count: 129))","op":"delete","bucket":"matrix","key":"k"}"#, code: "InvalidRequest"),
            Case(name: "bucket-upper", message: #"{"id":"m17","op":"delete","bucket":"Matrix","key":"k"}"#, code: "InvalidBucketName", id: "m17"),
            Case(name: "bucket-short", message: #"{"id":"m18","op":"delete","bucket":"ab","key":"k"}"#, code: "InvalidBucketName", id: "m18"),
            Case(name: "bucket-ip", message: #"{"id":"m19","op":"delete","bucket":"10.1.2.3","key":"k"}"#, code: "InvalidBucketName", id: "m19"),
            Case(name: "key-long", message: #"{"id":"m20","op":"delete","bucket":"matrix","key":"\#(longKey)"}"#, code: "KeyTooLongError", id: "m20"),
            Case(name: "meta-big", message: up("m21", #","metadata":{"note":"\#(bigMeta)"}"#), code: "MetadataTooLarge", id: "m21"),
            Case(name: "meta-name", message: up("m22", #","metadata":{"bad name":"v"}"#), code: "InvalidRequest", id: "m22"),
            Case(name: "header-copy-source", message: up("m23", #","headers":{"x-amz-copy-source":"/other/secret"}"#), code: "InvalidRequest", id: "m23"),
            Case(name: "header-auth", message: up("m24", #","headers":{"Authorization":"AWS4 x"}"#), code: "InvalidRequest", id: "m24"),
            Case(name: "dotdot-source", message: up("m25", "", source: "file://\(data.path)/../../../etc/passwd"), code: "InvalidPath", id: "m25"),
            Case(name: "abs-source", message: up("m26", "", source: "file:///etc/passwd"), code: "InvalidPath", id: "m26"),
            Case(name: "symlink-source", message: up("m27", "", source: escape), code: "InvalidPath", id: "m27"),
            Case(name: "ftp-source", message: up("m28", "", source: "ftp://example.com/x"), code: "InvalidPath", id: "m28"),
            Case(name: "dotdot-dest", message: down("m29", "file://\(data.path)/../ferry-matrix-outside.txt"), code: "InvalidPath", id: "m29"),
            Case(name: "abs-dest", message: down("m30", "file://\(root.path)/outside/ferry.txt"), code: "InvalidPath", id: "m30"),
            Case(name: "https-disabled", message: up("m31", "", source: "https://127.0.0.1:1/x"), code: "ForbiddenSource", id: "m31"),
            Case(name: "data-not-base64", message: up("m32", "", source: "data:;base64,@@@"), code: "InvalidRequest", id: "m32"),
            Case(name: "part-size", message: up("m33", #","options":{"partSizeBytes":1024}"#), code: "InvalidRequest", id: "m33"),
            Case(name: "checksum-md4", message: up("m34", #","options":{"checksumAlgorithm":"MD4"}"#), code: "InvalidRequest", id: "m34"),
            Case(name: "retry-negative", message: up("m35", #","options":{"retryLimit":-1}"#), code: "InvalidRequest", id: "m35"),
            Case(name: "accelerate", message: up("m36", #","options":{"accelerate":true}"#), code: "InvalidRequest", id: "m36"),
            Case(name: "private-other", message: down("m37", inside + ".out", #","accessLevel":"private","identityId":"bob","targetIdentityId":"alice""#),
                 code: "AccessDenied", id: "m37"),
            Case(name: "protected-write-other", message: up("m38", #","accessLevel":"protected","identityId":"bob","targetIdentityId":"alice""#),
                 code: "AccessDenied", id: "m38"),
            Case(name: "private-no-identity", message: up("m39", #","accessLevel":"private""#), code: "InvalidRequest", id: "m39"),
            Case(name: "copy-private-other", message: #"{"id":"m40","op":"copy","bucket":"matrix","key":"c","identityId":"bob","source":"s3://matrix/private/alice/s"}"#,
                 code: "AccessDenied", id: "m40"),
            Case(name: "level-unknown", message: #"{"id":"m41","op":"delete","bucket":"matrix","key":"k","accessLevel":"secret"}"#, code: "InvalidRequest", id: "m41"),
            Case(name: "secrets-redacted", message: up("m43", #","accessLevel":"private","identityId":"bob","targetIdentityId":"alice","auth":"tok.en.value","headers":{"x-amz-server-side-encryption-customer-key":"a2V5a2V5"}"#),
                 code: "AccessDenied", id: "m43", secrets: ["tok.en.value", "a2V5a2V5"]),
            // A member named twice: readers differ on which value counts (Foundation's decoder
            // took the first, a gateway in Python or Go checks the last), so neither is taken.
            Case(name: "identity-twice", message: down("m44", inside + ".out", #","accessLevel":"private","identityId":"alice","identityId":"bob""#),
                 code: "InvalidRequest", id: "m44"),
            Case(name: "key-twice-escaped", message: #"{"id":"m45","op":"delete","bucket":"matrix","key":"k","k\u0065y":"../../victim"}"#,
                 code: "InvalidRequest", id: "m45"),
            Case(name: "trailing-comma", message: #"{"id":"m46","op":"delete","bucket":"matrix","key":"k",}"#, code: "MalformedRequest", id: "m46"),
            Case(name: "auth-twice", message: #"{"id":"m47","op":"delete","bucket":"matrix","key":"k","auth":"first.tok.en","auth":"second.tok.en"}"#,
                 code: "InvalidRequest", id: "m47", secrets: ["first.tok.en", "second.tok.en"]),
            Case(name: "oversize", message: #"{"id":"m42","op":"delete","bucket":"matrix","key":"k","pad":"\#(String(repeating: "p", count: 950_000))"}"#,
                 code: "RequestTooLarge"),
        ]
    }

    @Test func everyCaseIsDeadLetteredWithItsCode() async throws {
        try await MotoServer.start(logDirectory: try TestPaths.temporaryDirectory("matrix-moto")).stopAfter { moto in
            try await EndToEndTests().withEnvironment(moto) { env in
                let root = env.dataRoot.deletingLastPathComponent()
                try await Boto3(moto)("create-bucket", "matrix")
                let inDir = env.dataRoot.appendingPathComponent("in")
                try FileManager.default.createDirectory(at: inDir, withIntermediateDirectories: true)
                try Data("ok\n".utf8).write(to: inDir.appendingPathComponent("ok.txt"))
                try FileManager.default.createSymbolicLink(atPath: inDir.appendingPathComponent("escape-link").path, withDestinationPath: "/etc/hostname")
                let cases = Self.cases(root: root)
                #expect(cases.count >= 40)

                let worker = try env.startWorker(name: "worker-matrix", stateDir: "state-matrix")
                for c in cases { try await env.kcat.produce(topic: "ferry.requests", key: c.name, value: c.message) }
                // A good request after all of them: the partition is not blocked.
                try await env.kcat.produce(topic: "ferry.requests", key: "canary", value: """
                    {"id":"matrix-canary","op":"upload","bucket":"matrix","key":"canary.txt","source":"\(inDir.appendingPathComponent("ok.txt").absoluteString)"}
                    """)
                let canary = try await env.terminalStatus(of: "matrix-canary", timeout: 90)
                #expect(canary?.state == .completed, "\(worker.log)")
                #expect(worker.isRunning)

                var dlq: [Kcat.Record] = []
                _ = try await eventually(timeout: 30) {
                    dlq = try await env.kcat.consumeAll(topic: "ferry.requests.dlq")
                    return dlq.count >= cases.count
                }
                let statuses = try await env.statuses()
                for c in cases {
                    let record = dlq.first { $0.key == c.name }
                    #expect(record != nil, "\(c.name): no DLQ record")
                    if !c.secrets.isEmpty {
                        // Secrets are replaced in place (every copy); everything else is the original.
                        let expected = c.secrets.reduce(c.message) { $0.replacingOccurrences(of: "\"\($1)\"", with: "\"<redacted>\"") }
                        #expect(record?.value == expected, "\(c.name)")
                        #expect(record?.headers.contains("ferry-redacted=") == true)
                    } else {
                        #expect(record?.value == c.message, "\(c.name): DLQ value is not the original bytes")
                    }
                    #expect(record?.headers.contains("ferry-error-code=\(c.code)") == true, "\(c.name): \(record?.headers ?? "")")
                    #expect(record?.headers.contains("ferry-error-message=") == true)
                    if let id = c.id {
                        let rejected = statuses.first { $0.id == id && $0.state == .rejected }
                        #expect(rejected?.error?.code == c.code, "\(c.name): status \(String(describing: rejected))")
                    }
                }
                #expect(dlq.count == cases.count)
                // Nothing was written: only the canary is in the bucket, no file outside the root.
                let listing = try await runChecked("python3", ["-c", """
                    import boto3, sys
                    r = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1").list_objects_v2(Bucket="matrix")
                    print(sorted(o["Key"] for o in r.get("Contents", [])))
                    """, moto.endpoint], environment: moto.clientEnvironment)
                #expect(listing.trimmingCharacters(in: .whitespacesAndNewlines) == "['public/canary.txt']")
                #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("ferry-matrix-outside.txt").path))
                #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("outside").path))

                // Offsets are committed: a new worker with empty state sees none of them again.
                #expect(await worker.stop() == 0)
                let second = try env.startWorker(name: "worker-matrix-2", stateDir: "state-matrix-2")
                try await env.kcat.produce(topic: "ferry.requests", key: "canary2", value: """
                    {"id":"matrix-canary-2","op":"delete","bucket":"matrix","key":"canary.txt"}
                    """)
                #expect(try await env.terminalStatus(of: "matrix-canary-2", timeout: 90)?.state == .completed)
                #expect(try await env.kcat.consumeAll(topic: "ferry.requests.dlq").count == cases.count)
                print("bad-input matrix: \(cases.count) cases dead-lettered with their codes; worker alive; offsets committed")
                await second.stop()
            }
        }
    }
}
