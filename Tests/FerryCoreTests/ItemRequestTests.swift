import FerryCore
import FerryTestSupport
import Foundation
import PropertyBased
import Testing

/// Item requests: the decoder's verdict on generated hostile messages, the
/// S3ObjectInput shape, table declarations and the item key.
@Suite struct ItemRequestTests {
    /// Invariant: no message stops the decoder, and an accepted item request's
    /// files pass every rule an upload's source, bucket and key pass.
    @Test func everyItemRequestGetsAVerdictAndAcceptedFilesPassTheUploadRules() async {
        await propertyCheck(count: 3000, input: HostileInputPropertyTests.messages) { message in
            // Yields between inputs: the checks are long synchronous loops, and on two cores
            // (ThreadSanitizer: for a minute) they held the cooperative pool from the other tests.
            await Task.yield()
            switch RequestDecoder.decodeAny(message.value) {
            case .success(.item(let request)):
                #expect(TableDefinition.nameProblem(request.table) == nil)
                #expect(request.files.count <= FileInput.maxFiles)
                for file in request.files {
                    #expect(RequestLimits.bucketNameProblem(file.bucket) == nil)
                    #expect(ObjectKeyRule.violation(of: file.key) == nil)
                    let upload = TransferRequest(id: request.id, op: .upload, bucket: file.bucket, key: file.key,
                                                 accessLevel: request.accessLevel, identityId: request.identityId, source: file.source)
                    #expect(RequestDecoder.validate(upload) == nil, "\(file)")
                }
            case .success(.transfer(let request)):
                #expect(RequestDecoder.validate(request) == nil)
            case .failure(let failure):
                #expect(!failure.error.message.isEmpty)
            }
        }
    }

    @Test func s3ObjectInputsAreFoundWhereverTheySit() throws {
        let json = #"""
        {"id":"r1","op":"putItem","table":"posts","item":{"id":"p1","title":"t",
         "picture":{"bucket":"demo","key":"a.jpg","region":"us-east-1","localUri":"/srv/a.jpg","mimeType":"image/jpeg"},
         "gallery":[{"bucket":"demo","key":"b.jpg","source":"data:,x"},{"not":"a file"}],
         "nested":{"cover":{"bucket":"demo","key":"c.jpg","localUri":"file:///srv/c.jpg"}},
         "almost":{"bucket":"demo","key":"d.jpg","localUri":"/srv/d.jpg","extra":1}}}
        """#
        guard case .success(.item(let request)) = RequestDecoder.decodeAny(Array(json.utf8)) else { Issue.record("not decoded"); return }
        #expect(request.files.map(\.pathText) == ["gallery[0]", "nested.cover", "picture"])
        #expect(request.files.map(\.source) == ["data:,x", "file:///srv/c.jpg", "file:///srv/a.jpg"])
        #expect(request.files.last?.mimeType == "image/jpeg")
        // A map with fields outside S3ObjectInput's is data, not a file.
        #expect(request.item["almost"] != nil && !request.files.contains { $0.key == "d.jpg" })
        var item = request.item
        item.set(.string("replaced"), at: request.files[0].path)
        #expect(item.value(at: request.files[0].path) == .string("replaced"))
    }

    @Test(arguments: [
        (#"{"id":"r","op":"putItem","table":"posts"}"#, "needs an 'item'"),
        (#"{"id":"r","op":"deleteItem","table":"posts","item":{"id":"x"}}"#, "needs a 'key'"),
        (#"{"id":"r","op":"updateItem","table":"posts","key":{"id":"x"}}"#, "'item' (attributes to set) or 'remove'"),
        (#"{"id":"r","op":"putItem","table":"objects","item":{"id":"x"}}"#, "Ferry's own"),
        (#"{"id":"r","op":"putItem","table":"posts","item":{"id":"x","p":{"bucket":"demo","key":"../x","localUri":"/a"}}}"#, "key"),
        (#"{"id":"r","op":"putItem","table":"posts","item":{"id":"x","p":{"bucket":"demo","key":"k","localUri":"rel/a"}}}"#, "absolute path"),
        (#"{"id":"r","op":"putItem","table":"posts","item":{"id":"x","p":{"bucket":"demo","key":"k","localUri":"/a","source":"data:,x"}}}"#, "both"),
        (#"{"id":"r","op":"putItem","table":"posts","accessLevel":"private","item":{"id":"x"}}"#, "needs an identityId"),
    ])
    func malformedItemRequestsAreRefusedWithAReason(json: String, expected: String) {
        guard case .failure(let failure) = RequestDecoder.decodeAny(Array(json.utf8)) else { Issue.record("accepted: \(json)"); return }
        #expect(failure.error.message.contains(expected), "\(failure.error)")
        #expect(failure.id == "r")
    }

    @Test func deepItemsAreRefusedNotRecursedForever() {
        let deep = "{\"id\":\"r\",\"op\":\"putItem\",\"table\":\"posts\",\"item\":{\"id\":\"x\",\"d\":"
            + String(repeating: "[", count: 200) + String(repeating: "]", count: 200) + "}}"
        guard case .failure(let failure) = RequestDecoder.decodeAny(Array(deep.utf8)) else { Issue.record("accepted"); return }
        #expect(failure.error.message.contains("nested deeper"))
    }

    @Test func tableDeclarations() throws {
        let posts = try TableDefinition(parsing: "posts:id")
        #expect(posts.keyAttributes == ["id"] && !posts.deletesUnreferencedFiles)
        let comments = try TableDefinition(parsing: "comments:postId/at:delete-files")
        #expect(comments.keyAttributes == ["postId", "at"] && comments.deletesUnreferencedFiles)
        for bad in ["posts", "posts:", "posts:a/b/c", "p:id", "posts:id:purge", "objects:id", "a b:id"] {
            #expect(throws: FerryError.self, "\(bad)") { try TableDefinition(parsing: bad) }
        }
        #expect(throws: FerryError.self) { try TableDefinition.parseAll(["posts:id", "posts:x"]) }
        #expect(try TableDefinition.parseAll(["posts:id,comments:postId/at"]).map(\.name) == ["posts", "comments"])
        // The item key: one text per key, whatever the attribute order or value text.
        let keys = try comments.keys(of: ["at": .number("3"), "postId": .string("p/1"), "other": .bool(true)])
        #expect(comments.itemKey(keys) == #"[{"S":"p/1"},{"N":"3"}]"#)
        #expect(throws: FerryError.self) { try comments.keys(of: ["postId": .string("p")]) }
        #expect(throws: FerryError.self) { try posts.keys(of: ["id": .map([:])]) }
    }

    @Test func queriesMatchByPartitionKeyAndSortKeyRange() {
        func record(_ pk: String, _ sk: AttributeValue) -> ItemRecord {
            ItemRecord(table: "t", keySchema: ["pk", "sk"], keys: ["pk": .string(pk), "sk": sk], item: [:], version: 1, owner: nil,
                       requestId: "r", updatedAt: "")
        }
        let records = [record("a", .number("10")), record("a", .number("9")), record("a", .number("100")), record("b", .number("9"))]
        let numeric = ItemQuery(table: "t", partitionKey: "a", from: "9", to: "50")
        #expect(records.filter(numeric.matches).sorted(by: ItemQuery.sortKeyOrder).compactMap { $0.keys["sk"]?.stringValue } == ["9", "10"])
        let texts = [record("a", .string("2026-01")), record("a", .string("2026-02")), record("a", .string("2025-12"))]
        #expect(texts.filter(ItemQuery(table: "t", partitionKey: "a", sortKeyPrefix: "2026-").matches).count == 2)
        // A limit from a command line or a caller is never negative (a negative prefix would trap).
        #expect(ItemQuery(table: "t", partitionKey: "a", limit: -5).limit == 0)
    }
}
