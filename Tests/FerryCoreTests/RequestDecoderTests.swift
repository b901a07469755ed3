import FerryCore
import FerryTestSupport
import Foundation
import Testing

@Suite struct RequestDecoderTests {
    func decode(_ json: String) -> Result<TransferRequest, RequestDecoder.Failure> {
        RequestDecoder.decode(Array(json.utf8))
    }

    @Test func decodesAFullUpload() throws {
        let json = """
            {"id":"job-1","op":"upload","bucket":"photos","key":"cats/a b.jpg","accessLevel":"protected",
             "identityId":"alice","source":"file:///data/a.jpg","contentType":"image/jpeg",
             "metadata":{"camera":"x100"},"options":{"partSizeBytes":8388608,"retryLimit":0},"unknownField":42}
            """
        let request = try decode(json).get()
        #expect(request.id == "job-1")
        #expect(request.op == .upload)
        #expect(request.key == "cats/a b.jpg")
        #expect(request.effectiveAccessLevel == .protected)
        #expect(request.metadata == ["camera": "x100"])
        #expect(request.options?.retryLimit == 0)
        #expect(request.kafkaKey == "photos/cats/a b.jpg")
    }

    @Test(arguments: [
        ("not json at all", "MalformedRequest", nil as String?),
        ("[1,2,3]", "MalformedRequest", nil),
        (#"{"id":"a1","op":"explode","bucket":"bkt","key":"k"}"#, "UnsupportedOperation", "a1"),
        (#"{"id":"a2","op":"upload","bucket":"bkt"}"#, "InvalidRequest", "a2"),
        (#"{"id":"a3","op":"upload","bucket":"bkt","key":"k"}"#, "InvalidRequest", "a3"),
        (#"{"id":"a4","op":"download","bucket":"bkt","key":"k"}"#, "InvalidRequest", "a4"),
        (#"{"id":"a5","op":"upload","bucket":"bkt","key":7,"source":"file:///x"}"#, "InvalidRequest", "a5"),
        (#"{"id":"bad id!","op":"delete","bucket":"bkt","key":"k"}"#, "InvalidRequest", nil),
        (#"{"id":"a6","op":"delete","bucket":"","key":"k"}"#, "InvalidRequest", "a6"),
        (#"{"id":"a7","op":"delete","bucket":"bkt","key":"k","accessLevel":"private"}"#, "InvalidRequest", "a7"),
        (#"{"id":"a8","op":"delete","bucket":"bkt","key":"k","accessLevel":"secret"}"#, "InvalidRequest", "a8"),
    ])
    func rejectsBadInputWithACode(json: String, code: String, id: String?) {
        guard case .failure(let failure) = decode(json) else {
            Issue.record("accepted \(json)")
            return
        }
        #expect(failure.error.code.rawValue == code)
        #expect(failure.id == id)
        #expect(!failure.error.message.isEmpty)
    }

    /// An unknown op is neither carried on nor quoted whole: a 300,000-byte op
    /// made a 308 KB `rejected` status and a metrics series of its own.
    @Test func anUnknownOpIsClippedAndNotCarriedOn() throws {
        let huge = String(repeating: "x", count: 300_000)
        for op in [huge, "upload-2", "Upload", "evil\"} 1\nfake 42"] {
            let json = String(decoding: try JSONSerialization.data(withJSONObject: ["id": "t-1", "op": op, "bucket": "bkt", "key": "k"]), as: UTF8.self)
            guard case .failure(let failure) = RequestDecoder.decodeAny(Array(json.utf8)) else {
                Issue.record("op \(op.prefix(20)) was accepted"); continue
            }
            #expect(failure.op == nil && failure.id == "t-1" && failure.error.code == .unsupportedOperation)
            #expect(failure.error.message.utf8.count < 200, "\(failure.error.message.prefix(200))")
        }
        guard case .failure(let failure) = decode(#"{"id":"t-2","op":"copy","bucket":"bkt","key":"k"}"#) else {
            Issue.record("a copy without a source was accepted"); return
        }
        #expect(failure.op == "copy", "a known op still names the rejected request's op")
    }

    /// No request that names a member twice is taken, whichever member, in
    /// whichever object, however the second name is spelled: readers differ
    /// on which value counts (a gateway may have checked the other one).
    @Test func aRequestThatNamesAMemberTwiceIsRefused() throws {
        typealias Member = (name: String, value: String, other: String)
        let objects: [String: [Member]] = [
            "": [("id", #""dup-0""#, #""dup-1""#), ("op", #""upload""#, #""delete""#), ("bucket", #""photos""#, #""victims""#),
                 ("key", #""cats/tom.jpg""#, #""../../x""#), ("source", #""file:///data/a.jpg""#, #""file:///etc/passwd""#),
                 ("accessLevel", #""private""#, #""guest""#), ("identityId", #""bob""#, #""alice""#),
                 ("auth", #""tok.en.sig""#, #""other.tok.en""#), ("unknownField", "42", "43")],
            "metadata": [("camera", #""x100""#, #""y""#), ("owner", #""bob""#, #""alice""#)],
            "headers": [("cache-control", #""no-cache""#, #""max-age=1""#)],
            "options": [("retryLimit", "2", "0"), ("partSizeBytes", "8388608", "5242880")],
        ]
        func text(_ members: [Member], _ extra: (index: Int, text: String)? = nil) -> String {
            var parts = members.map { "\"\($0.name)\":\($0.value)" }
            if let extra { parts.insert(extra.text, at: extra.index) }
            return "{" + parts.joined(separator: ",") + "}"
        }
        func request(_ duplicate: (object: String, text: String, index: Int)? = nil) -> String {
            var members = objects[""]!
            for nested in ["metadata", "headers", "options"] {
                let inner = duplicate?.object == nested ? (duplicate!.index, duplicate!.text) : nil
                members.append((nested, text(objects[nested]!, inner), ""))
            }
            return text(members, duplicate?.object == "" ? (duplicate!.index, duplicate!.text) : nil)
        }
        #expect((try? decode(request()).get()) != nil, "the request without a repeat is valid")
        let seed = FuzzReplay.seed
        var rng = HostileInput.rng(seed: seed)
        for round in 0..<1500 {
            let object = objects.keys.sorted().randomElement(using: &rng)!
            let member = objects[object]!.randomElement(using: &rng)!
            // The name as written, or with one character as a \u escape (which reads the same).
            var name = member.name
            if Bool.random(using: &rng) {
                let scalars = Array(name.unicodeScalars)
                let at = Int.random(in: 0..<scalars.count, using: &rng)
                name = String(String.UnicodeScalarView(scalars[..<at])) + String(format: "\\u%04x", scalars[at].value)
                    + String(String.UnicodeScalarView(scalars[(at + 1)...]))
            }
            let value = Bool.random(using: &rng) ? member.other : member.value
            let count = objects[object]!.count + (object.isEmpty ? 3 : 0)
            let text = request((object, "\"\(name)\":\(value)", Int.random(in: 0...count, using: &rng)))
            guard case .failure(let failure) = decode(text) else {
                Issue.record("seed \(seed) round \(round): taken: \(text)")
                continue
            }
            let path = object.isEmpty ? member.name : "\(object).\(member.name)"
            #expect(failure.error.code == .invalidRequest && failure.error.message.contains("'\(path)' appears more than once"),
                    "seed \(seed) round \(round): \(failure.error) for \(text)")
            // The rejection names the request only when the text names it once.
            #expect(failure.id == (path == "id" ? nil : "dup-0"))
        }
    }

    @Test func aTrailingCommaIsRefusedAndTheRequestNamed() {
        guard case .failure(let failure) = decode(#"{"id":"tc-1","op":"delete","bucket":"bkt","key":"k",}"#) else {
            Issue.record("a trailing comma was taken"); return
        }
        #expect(failure.error.code == .malformedRequest)
        #expect(failure.error.message == "message is not valid JSON: a comma before '}' at byte 51")
        #expect(failure.id == "tc-1" && failure.op == "delete")
        // Item requests come through the same door.
        guard case .failure(let item) = RequestDecoder.decodeAny(Array(#"{"id":"i-1","op":"putItem","table":"posts","item":{"id":"p","id":"q"}}"#.utf8)) else {
            Issue.record("an item that names a member twice was taken"); return
        }
        #expect(item.error.code == .invalidRequest && item.error.message.contains("member 'item.id' appears more than once"))
        #expect(item.id == "i-1" && item.op == "putItem")
    }

    @Test func idLimits() {
        let longest = String(repeating: "a", count: 128)
        #expect((try? decode(#"{"id":"\#(longest)","op":"delete","bucket":"bkt","key":"k"}"#).get()) != nil)
        #expect((try? decode(#"{"id":"\#(longest)a","op":"delete","bucket":"bkt","key":"k"}"#).get()) == nil)
        #expect((try? decode(#"{"id":"A.b_c:d-9","op":"delete","bucket":"bkt","key":"k"}"#).get()) != nil)
    }

    @Test func prefixResolution() throws {
        let resolver = DefaultPrefixResolver()
        var request = TransferRequest(id: "x", op: .upload, bucket: "b", key: "k.txt", source: "file:///a")
        #expect(try resolver.objectKey(for: request) == "public/k.txt")
        request.accessLevel = .private
        request.identityId = "alice"
        #expect(try resolver.objectKey(for: request) == "private/alice/k.txt")
        request = TransferRequest(id: "x", op: .download, bucket: "b", key: "k.txt", accessLevel: .protected,
                                  identityId: "bob", targetIdentityId: "alice", destination: "file:///a")
        #expect(try resolver.objectKey(for: request) == "protected/alice/k.txt")
        #expect(try PassThroughPrefixResolver().objectKey(for: request) == "k.txt")
    }
}

@Suite struct HeaderPolicyTests {
    @Test func allowListed() {
        #expect(HeaderPolicy.violation(in: ["Cache-Control": "max-age=60", "x-amz-server-side-encryption": "AES256",
                                            "x-amz-storage-class": "STANDARD_IA"]) == nil)
    }

    @Test(arguments: ["x-amz-copy-source", "authorization", "x-amz-grant-full-control", "host", "x-amz-checksum-crc32c"])
    func refused(name: String) {
        let request = #"{"id":"h1","op":"delete","bucket":"bkt","key":"k","headers":{"\#(name)":"v"}}"#
        guard case .failure(let failure) = RequestDecoder.decode(Array(request.utf8)) else {
            Issue.record("\(name) accepted")
            return
        }
        #expect(failure.error.code == .invalidRequest)
        #expect(failure.error.message.contains(name))
    }
}
