import FerryCore
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
