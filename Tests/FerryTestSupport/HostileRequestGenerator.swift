import Foundation
import PropertyBased

/// Whole request messages for the adversarial suite, from a seed: each starts
/// from a valid request and takes one to three mutations from a catalogue
/// that covers every field of the request schema (wrong types, boundary and
/// extreme numbers, odd Unicode and bytes, dot segments, traversal, FIFO and
/// symlink tricks, SSRF sources, header injection, oversized values, a member
/// named twice), or is replaced by raw bytes. A share of messages is left valid, so the suite can
/// check that valid work interleaved with hostile work still completes.
public struct HostileRequestGenerator {
    /// The places a generated request may name. Everything a hostile request
    /// could reach is inside `base`, so a breach is seen (and contained).
    public struct Sandbox: Sendable {
        public var dataRoot: URL
        /// Beside the data root: must stay exactly as it was.
        public var outside: URL
        public var bucket: String
        /// Another bucket with objects no request may touch.
        public var victimBucket: String
        /// A regular file inside the data root that valid uploads read.
        public var validSource: URL

        public init(dataRoot: URL, outside: URL, bucket: String, victimBucket: String, validSource: URL) {
            self.dataRoot = dataRoot; self.outside = outside; self.bucket = bucket
            self.victimBucket = victimBucket; self.validSource = validSource
        }

        /// Special files the generator points sources and destinations at (created by the suite).
        public var fifo: URL { dataRoot.appendingPathComponent("traps/fifo") }
        public var directory: URL { dataRoot.appendingPathComponent("traps/dir") }
        public var linkOut: URL { dataRoot.appendingPathComponent("traps/link-out") }
        public var victimFile: URL { outside.appendingPathComponent("victim.txt") }
    }

    public struct Message: Sendable {
        /// The id the message carries when it has a valid one (its outcome is looked up by it).
        public var id: String?
        public var key: [UInt8]?
        public var value: [UInt8]
        /// Meant to run to completion.
        public var isValid: Bool
        /// What was done to it, for failure reports.
        public var mutations: [String]
    }

    public let seed: UInt64
    public let sandbox: Sandbox
    private var rng: Xoshiro
    private var counter = 0
    /// Set by the "named twice" mutation: a member (quoted name, JSON value) the encoded text repeats.
    private var repeated: (name: String, value: String, field: String)?

    public init(seed: UInt64, sandbox: Sandbox) {
        self.seed = seed
        self.sandbox = sandbox
        self.rng = HostileInput.rng(seed: seed)
    }

    /// The next message; one in `validEvery` is a valid request.
    public mutating func next(validEvery: Int = 8) -> Message {
        counter += 1
        let id = "fz\(seed % 100_000)-\(counter)"
        var request = baseRequest(id: id)
        if Int.random(in: 0..<validEvery, using: &rng) == 0 {
            return Message(id: id, key: Array("\(sandbox.bucket)/fz/\(counter)".utf8), value: encode(request),
                           isValid: true, mutations: ["valid"])
        }
        // One in twelve is not JSON of our shape at all.
        if Int.random(in: 0..<12, using: &rng) == 0 {
            let (bytes, what) = rawBytes()
            return Message(id: nil, key: randomKafkaKey(), value: bytes, isValid: false, mutations: [what])
        }
        var mutations: [String] = []
        repeated = nil
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            mutations.append(mutate(&request))
        }
        var value = encode(request)
        // Brokers take at most about 1 MB: when large mutations add up past it,
        // the padding goes first, then the largest other fields, until it fits.
        if value.count > 960_000, request["pad"] != nil {
            request["pad"] = nil
            value = encode(request)
            mutations.append("pad dropped to fit the broker")
        }
        while value.count > 960_000, let largest = request.filter({ $0.key != "id" }).max(by: { $0.value.count < $1.value.count }) {
            request[largest.key] = nil
            value = encode(request)
            mutations.append("\(largest.key) dropped to fit the broker")
        }
        var carriedId = request["id"].flatMap { literal -> String? in
            guard literal.hasPrefix("\""), literal.hasSuffix("\"") else { return nil }
            let inner = String(literal.dropFirst().dropLast())
            return inner == id ? id : nil
        }
        if let repeated, request[repeated.field] == nil {
            // Named once, it would be an ordinary (valid) field, not a repeat.
            mutations.append("(\(repeated.field) absent: not repeated)")
        } else if let repeated {
            // First or last: readers that keep either would see the other value.
            let member = Array("\(repeated.name):\(repeated.value)".utf8)
            if Bool.random(using: &rng) {
                value.insert(contentsOf: member + [UInt8(ascii: ",")], at: 1)
            } else {
                value.insert(contentsOf: [UInt8(ascii: ",")] + member, at: value.count - 1)
            }
            // An id given twice names no request.
            if repeated.field == "id" { carriedId = nil }
        }
        return Message(id: carriedId, key: randomKafkaKey(), value: value, isValid: false, mutations: mutations)
    }

    // MARK: Requests as ordered JSON fields (values are JSON literals)

    private mutating func baseRequest(id: String) -> [String: String] {
        let op = ["upload", "upload", "upload", "download", "delete", "copy"].randomElement(using: &rng)!
        let key = "fz/\(counter)-\(["a.txt", "photo 1.jpg", "é/ü.bin", "x+y=z.txt"].randomElement(using: &rng)!)"
        var fields: [String: String] = [
            "id": HostileInput.jsonString(id), "op": HostileInput.jsonString(op),
            "bucket": HostileInput.jsonString(sandbox.bucket), "key": HostileInput.jsonString(key),
        ]
        switch op {
        case "upload":
            fields["source"] = HostileInput.jsonString(Bool.random(using: &rng)
                ? sandbox.validSource.absoluteString : "data:text/plain;base64,aGVsbG8gZmVycnkK")
            if Bool.random(using: &rng) { fields["metadata"] = #"{"note":"fuzz"}"# }
        case "download":
            fields["destination"] = HostileInput.jsonString(sandbox.dataRoot.appendingPathComponent("out/\(counter).bin").absoluteString)
            fields["key"] = HostileInput.jsonString("fz/seed.txt")
        case "copy":
            fields["source"] = HostileInput.jsonString("s3://\(sandbox.bucket)/public/fz/seed.txt")
        default:
            break
        }
        // Writes may name an identity's own area; reads of it would find nothing there.
        if op != "download" && Int.random(in: 0..<3, using: &rng) == 0 {
            fields["accessLevel"] = HostileInput.jsonString(["protected", "private"].randomElement(using: &rng)!)
            fields["identityId"] = HostileInput.jsonString("mallory")
        }
        return fields
    }

    private func encode(_ fields: [String: String]) -> [UInt8] {
        // A stable order, "id" first (as producers usually write it).
        let order = ["id", "op", "bucket", "key"]
        let sorted = fields.sorted { a, b in
            let ia = order.firstIndex(of: a.key) ?? order.count, ib = order.firstIndex(of: b.key) ?? order.count
            return ia != ib ? ia < ib : a.key < b.key
        }
        return Array(("{" + sorted.map { "\(HostileInput.jsonString($0.key)):\($0.value)" }.joined(separator: ",") + "}").utf8)
    }

    private mutating func mutate(_ fields: inout [String: String]) -> String {
        let schema = ["id", "op", "bucket", "key", "accessLevel", "identityId", "targetIdentityId", "source", "destination",
                      "contentType", "metadata", "headers", "options", "auth", "callback", "sourceAccessLevel", "sourceIdentityId", "unknown"]
        switch Int.random(in: 0..<18, using: &rng) {
        case 0:
            let field = schema.randomElement(using: &rng)!
            let value = HostileInput.jsonValue(&rng)
            fields[field] = value
            return "\(field)=\(value.prefix(60))"
        case 1:
            let key = HostileInput.key(&rng)
            fields["key"] = HostileInput.jsonString(key)
            return "key=\(key.debugDescription.prefix(80))"
        case 2:
            let level = ["guest", "protected", "private", "Private", "admin", ""].randomElement(using: &rng)!
            fields["accessLevel"] = HostileInput.jsonString(level)
            fields["identityId"] = HostileInput.jsonString(HostileInput.identity(&rng))
            if Bool.random(using: &rng) { fields["targetIdentityId"] = HostileInput.jsonString(["alice", HostileInput.identity(&rng)].randomElement(using: &rng)!) }
            return "level=\(level) identities"
        case 3:
            let source = hostileSource()
            fields["op"] = HostileInput.jsonString("upload")
            fields["source"] = HostileInput.jsonString(source)
            return "source=\(source.prefix(80))"
        case 4:
            let destination = hostileDestination()
            fields["op"] = HostileInput.jsonString("download")
            fields["key"] = HostileInput.jsonString("fz/seed.txt")
            fields["destination"] = HostileInput.jsonString(destination)
            return "destination=\(destination.prefix(80))"
        case 5:
            let name = ["note", "Note", "bad name", "ferry-owner", "ferry-transfer-id", "x", "é", ""].randomElement(using: &rng)!
            let value = HostileInput.headerValue(&rng)
            fields["metadata"] = "{" + HostileInput.jsonString(name) + ":" + HostileInput.jsonString(value) + ","
                + HostileInput.jsonString("camera") + ":" + HostileInput.jsonString("x100") + "}"
            return "metadata[\(name)]=\(value.debugDescription.prefix(60))"
        case 6:
            let name = ["cache-control", "Cache-Control", "content-disposition", "x-amz-tagging", "x-amz-copy-source",
                        "authorization", "host", "x-amz-acl", "x-amz-server-side-encryption-customer-key"].randomElement(using: &rng)!
            let value = HostileInput.headerValue(&rng)
            fields["headers"] = "{" + HostileInput.jsonString(name) + ":" + HostileInput.jsonString(value) + "}"
            return "headers[\(name)]=\(value.debugDescription.prefix(60))"
        case 7:
            let option = ["partSizeBytes", "partConcurrency", "retryLimit", "timeoutSeconds", "checksumAlgorithm", "accelerate"]
                .randomElement(using: &rng)!
            let value = Bool.random(using: &rng) ? HostileInput.numberLiterals.randomElement(using: &rng)! : HostileInput.jsonValue(&rng)
            fields["options"] = "{" + HostileInput.jsonString(option) + ":" + value + "}"
            return "options.\(option)=\(value.prefix(40))"
        case 8:
            let type = HostileInput.headerValue(&rng)
            fields["contentType"] = HostileInput.jsonString(type)
            return "contentType=\(type.debugDescription.prefix(60))"
        case 9:
            let source = ["s3://\(sandbox.victimBucket)/secret.txt", "s3://\(sandbox.bucket)/private/alice/secret.txt",
                          "s3://\(sandbox.bucket)/../\(sandbox.victimBucket)/secret.txt", "s3://\(sandbox.bucket)/public/../private/alice/secret.txt",
                          "s3://../x", "s3://", "s3:///k", "s3://\(sandbox.bucket)/" + HostileInput.key(&rng), "file:///etc/passwd"]
                .randomElement(using: &rng)!
            fields["op"] = HostileInput.jsonString("copy")
            fields["source"] = HostileInput.jsonString(source)
            return "copySource=\(source.debugDescription.prefix(80))"
        case 10:
            let bucket = [sandbox.victimBucket, "..", "../\(sandbox.victimBucket)", "UPPER", "ab", "192.168.0.1", sandbox.bucket + "/x",
                          String(repeating: "b", count: 64), "b\u{0}b"].randomElement(using: &rng)!
            fields["bucket"] = HostileInput.jsonString(bucket)
            return "bucket=\(bucket.debugDescription)"
        case 11:
            let op = ["delete", "download", "copy", "upload", "DELETE", "list", ""].randomElement(using: &rng)!
            fields["op"] = HostileInput.jsonString(op)
            fields["key"] = HostileInput.jsonString(HostileInput.key(&rng))
            if op == "download" { fields["destination"] = HostileInput.jsonString(hostileDestination()) }
            return "op=\(op) with a hostile key"
        case 12:
            let size = [600_000, 899_000, 905_000, 950_000].randomElement(using: &rng)!
            fields["pad"] = HostileInput.jsonString(String(repeating: "p", count: size))
            return "padded to \(size) bytes"
        case 13:
            return itemRequest(&fields)
        case 14:
            // Callbacks: Ferry's own topics (loops), SSRF targets, credentials, odd bytes, oversized.
            let callback = ["kafka:ferry.requests", "kafka:ferry.control", "kafka:", "kafka:a b", "kafka:" + String(repeating: "t", count: 250),
                            "kafka:../x", "https://169.254.169.254/latest", "https://127.0.0.1:1/cb", "https://[::1]/cb", "http://example.com/cb",
                            "https://user:pass@example.com/cb", "https://example.com/cb\r\ninjected: yes", "ftp://example.com", "",
                            "https://example.com/" + String(repeating: "p", count: 3000), "kafka:app.replies"].randomElement(using: &rng)!
            fields["callback"] = HostileInput.jsonString(callback)
            return "callback=\(callback.debugDescription.prefix(60))"
        case 15:
            // Copies naming their source by level and owner, including levels and owners they may not read.
            let level = ["guest", "protected", "private", "Private", "admin", ""].randomElement(using: &rng)!
            fields["op"] = HostileInput.jsonString(["copy", "copy", "upload"].randomElement(using: &rng)!)
            fields["source"] = HostileInput.jsonString("s3://\(sandbox.bucket)/" + ["doc.txt", "secret.txt", "../secret.txt", HostileInput.key(&rng)]
                .randomElement(using: &rng)!)
            fields["sourceAccessLevel"] = HostileInput.jsonString(level)
            if Bool.random(using: &rng) { fields["sourceIdentityId"] = HostileInput.jsonString(["alice", HostileInput.identity(&rng)].randomElement(using: &rng)!) }
            return "sourceAccessLevel=\(level)"
        case 16:
            // Claim checks that do not add up: wrong counts, positions, sizes, digests, topics.
            let source = ["kafka-chunks://ferry.uploads?size=10&sha256=\(String(repeating: "a", count: 64))&chunk=4&at=0:0",
                          "kafka-chunks://ferry.uploads?size=-1&sha256=x&chunk=0&at=",
                          "kafka-chunks://ferry.uploads?size=99999999999&sha256=\(String(repeating: "b", count: 64))&chunk=524288&at=0:0",
                          "kafka-chunks://ferry.uploads?size=4&sha256=\(String(repeating: "c", count: 64))&chunk=4&at=0:999999999",
                          "kafka-chunks://../etc?size=1&sha256=\(String(repeating: "d", count: 64))&chunk=1&at=0:0",
                          "kafka-chunks://ferry.uploads?size=1&size=2", "kafka-chunks://"].randomElement(using: &rng)!
            fields["op"] = HostileInput.jsonString("upload")
            fields["source"] = HostileInput.jsonString(source)
            return "claimCheck=\(source.prefix(60))"
        case 17:
            // A member named twice, the second spelled alike or with one character escaped.
            let field = ["id", "op", "bucket", "key", "accessLevel", "identityId", "targetIdentityId", "source", "destination",
                         "auth", "headers", "metadata"].randomElement(using: &rng)!
            let value = field == "headers" ? #"{"x-amz-copy-source":"/victim/secret.txt"}"#
                : field == "metadata" ? #"{"note":"twice"}"#
                : [HostileInput.jsonString("alice"), HostileInput.jsonString(sandbox.victimBucket), HostileInput.jsonString("private"),
                   HostileInput.jsonString("../private/alice/secret.txt"), HostileInput.jsonString(sandbox.victimFile.absoluteString),
                   HostileInput.jsonValue(&rng)].randomElement(using: &rng)!
            var name = HostileInput.jsonString(field)
            if Bool.random(using: &rng) {
                let scalars = Array(field.unicodeScalars), at = Int.random(in: 0..<scalars.count, using: &rng)
                name = "\"" + String(String.UnicodeScalarView(scalars[..<at])) + String(format: "\\u%04x", scalars[at].value)
                    + String(String.UnicodeScalarView(scalars[(at + 1)...])) + "\""
            }
            repeated = (name, value, field)
            return "\(field) named twice (\(name)=\(value.prefix(40)))"
        default:
            let id = ["", String(repeating: "i", count: 129), "a b", "x/../y", "é", "id\n"].randomElement(using: &rng)!
            fields["id"] = HostileInput.jsonString(id)
            return "id=\(id.debugDescription.prefix(40))"
        }
    }

    /// An item request (table `fzposts`, key `id`) whose files have hostile
    /// buckets, keys and sources, or whose item, key or table is malformed.
    private mutating func itemRequest(_ fields: inout [String: String]) -> String {
        let op = ["putItem", "putItem", "putItem", "updateItem", "deleteItem", "putitem"].randomElement(using: &rng)!
        let table = ["fzposts", "fzposts", "fzposts", "objects", "nope", "a/b", ""].randomElement(using: &rng)!
        let bucket = [sandbox.bucket, sandbox.bucket, sandbox.victimBucket, "..", "UPPER"].randomElement(using: &rng)!
        let key = ["fz/item-\(counter).txt", HostileInput.key(&rng), "../private/alice/x", "/abs", ""].randomElement(using: &rng)!
        let location = [#""localUri":\#(HostileInput.jsonString(sandbox.validSource.path))"#,
                        #""source":\#(HostileInput.jsonString(hostileSource()))"#,
                        #""localUri":\#(HostileInput.jsonString(hostileSource()))"#,
                        #""localUri":"relative/x""#, #""localUri":"/etc/passwd","source":"data:,x""#].randomElement(using: &rng)!
        let file = "{\"bucket\":\(HostileInput.jsonString(bucket)),\"key\":\(HostileInput.jsonString(key)),\(location)}"
        let id = HostileInput.jsonString("it-\(counter)")
        let item = [
            "{\"id\":\(id),\"picture\":\(file)}",
            "{\"id\":\(id),\"pics\":[\(file),\(file)],\"n\":1e400}",
            // Numbers DynamoDB refuses and Foundation rounded or zeroed without a word.
            "{\"id\":\(id),\"picture\":\(file),\"n\":[1e-400,1234567890123456789012345678901234567890123,9.99e125]}",
            "{\"id\":{\"S\":\"x\"},\"picture\":\(file)}",
            "{\"picture\":\(file)}",
            "{\"id\":\(id),\"deep\":" + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "}",
            "{\"id\":\(id),\"many\":[" + Array(repeating: file, count: 17).joined(separator: ",") + "]}",
            "{\"id\":\(id),\"\":1}", "[]", "\"x\"",
        ].randomElement(using: &rng)!
        var next = ["id": fields["id"] ?? id, "op": HostileInput.jsonString(op), "table": HostileInput.jsonString(table)]
        switch op {
        case "updateItem": next["key"] = "{\"id\":\(id)}"; next["item"] = item; next["remove"] = ["[\"n\"]", "[\"id\"]", "[1]"].randomElement(using: &rng)!
        case "deleteItem": next["key"] = Bool.random(using: &rng) ? "{\"id\":\(id)}" : item
        default: next["item"] = item
        }
        for name in ["accessLevel", "identityId", "auth"] { next[name] = fields[name] }
        fields = next
        return "item op=\(op) table=\(table) bucket=\(bucket.debugDescription) key=\(key.debugDescription.prefix(60)) \(location.prefix(60)) item=\(item.prefix(60))"
    }

    private mutating func hostileSource() -> String {
        let root = sandbox.dataRoot.path
        return [
            "file://\(root)/../\(sandbox.outside.lastPathComponent)/victim.txt",
            "file://\(root)/%2e%2e/\(sandbox.outside.lastPathComponent)/victim.txt",
            "file://\(sandbox.victimFile.path)", "file:///etc/passwd", "file:///proc/self/environ", "file:///dev/zero",
            "file://\(sandbox.fifo.path)", "file://\(sandbox.directory.path)", "file://\(sandbox.linkOut.path)",
            "file://remote-host/\(root)/in.txt", "file:\(root)/relative", "file://\(root)/missing-\(counter)",
            "https://169.254.169.254/latest/meta-data/", "https://127.0.0.1:1/x", "https://[::1]/x", "https://10.0.0.1/x",
            "http://example.com/x", "gopher://127.0.0.1/x", "ftp://example.com/x", "https://user:pass@127.0.0.1/x",
            "data:;base64,====", "data:;base64,QQ=Q", "data:;base64,QR==", "data:;base64,aGVsbG8", "data:;base64, aGVsbG8=",
            "data:text/plain\r\nx-amz-meta-injected: yes;base64,aGk=", "data:%zz", "data:,100%", "data:",
            "data:;base64," + String(repeating: "QUFB", count: 180_000),
        ].randomElement(using: &rng)!
    }

    private mutating func hostileDestination() -> String {
        let root = sandbox.dataRoot.path
        return [
            "file://\(root)/../\(sandbox.outside.lastPathComponent)/written-\(counter).txt",
            "file://\(sandbox.victimFile.path)", "file://\(sandbox.outside.path)/new-\(counter).txt",
            "file://\(sandbox.fifo.path)", "file://\(sandbox.directory.path)", "file://\(sandbox.linkOut.path)/x.txt",
            "file://\(sandbox.linkOut.path)", "file://\(root)/", "file://\(root)/.", "file://\(root)/out/..",
            "file:///nonexistent-ferry-fuzz/\(counter)", "file://\(root)/out/%2e%2e/%2e%2e/escape-\(counter)",
            "file://\(root)/out/" + HostileInput.key(&rng).replacingOccurrences(of: "\u{0}", with: ""),
        ].randomElement(using: &rng)!
    }

    private mutating func rawBytes() -> ([UInt8], String) {
        switch Int.random(in: 0..<7, using: &rng) {
        case 0: return ((0..<Int.random(in: 0...400, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }, "random bytes")
        case 1: return (Array("{\"id\":\"x\",\"op\":".utf8), "truncated JSON")
        case 2: return (Array((String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)).utf8), "deep nesting")
        case 3: return ([0xEF, 0xBB, 0xBF] + Array(#"{"id":"bom","op":"delete","bucket":"b","key":"k"}"#.utf8), "BOM prefix")
        case 4: return ([0xC0, 0xAF, 0xFF, 0xFE] + Array(#"{"id":"\#u{FFFD}"}"#.utf8), "invalid UTF-8")
        case 5: return (Array(String(repeating: "x", count: 950_000).utf8), "950 kB of text")
        default: return (Array(HostileInput.jsonValue(&rng).utf8), "a JSON value that is not an object")
        }
    }

    private mutating func randomKafkaKey() -> [UInt8]? {
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: return nil
        case 1: return Array(HostileInput.key(&rng).utf8)
        case 2: return (0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        default: return Array("\(sandbox.bucket)/fz".utf8)
        }
    }
}
