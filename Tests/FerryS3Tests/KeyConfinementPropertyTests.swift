import FerryCore
@testable import FerryS3
@testable import FerryLocalStore
@testable import FerryStorage
import FerryTestSupport
import Foundation
import PropertyBased
import Testing

/// "No key leaves its prefix", checked on generated keys and identities down
/// to the URL the S3 client puts on the wire.
@Suite struct KeyConfinementPropertyTests {
    /// Invariant: no key leaves its prefix. Whatever key, identity and level a
    /// request names, if it is accepted, the path the S3 request carries is
    /// unchanged by dot-segment removal (RFC 3986 §5.2.4), as a client or server
    /// would apply it, before or after percent-decoding, and it lies under the
    /// bucket and the level's prefix.
    @Test func noAcceptedKeyLeavesItsPrefix() async throws {
        let custom = try TemplatePrefixResolver(guest: "pub/", protected: "prot/{identityId}/p/", private: "priv-{identityId}/")
        let resolvers: [any PrefixResolver] = [DefaultPrefixResolver(), custom, PassThroughPrefixResolver()]
        let levels = Gen<AccessLevel?>.element(of: AccessLevel.allCases).map { $0 ?? .guest }
        let ops = Gen<TransferOperation?>.element(of: TransferOperation.allCases).map { $0 ?? .delete }
        await propertyCheck(count: 5000, input: HostileInput.keys, HostileInput.identities, levels, ops) { key, identity, level, op in
            // Yields between inputs: the checks are long synchronous loops, and on two cores
            // (ThreadSanitizer: for a minute) they held the cooperative pool from the other tests.
            await Task.yield()
            let request = TransferRequest(id: "p1", op: op, bucket: "fuzz", key: key, accessLevel: level, identityId: identity,
                                          source: op == .copy ? "s3://fuzz/public/a" : (op == .upload ? "data:,x" : nil),
                                          destination: op == .download ? "file:///srv/x" : nil)
            guard RequestDecoder.validate(request) == nil else { return }
            for resolver in resolvers {
                guard let objectKey = try? resolver.objectKey(for: request) else { continue }
                let prefix = (try? resolver.prefix(for: level, owner: identity)) ?? "?"
                #expect(objectKey.hasPrefix(prefix) && objectKey.dropFirst(prefix.count) == key[...])
                #expect(RequestLimits.violation(of: request, objectKey: objectKey)?.code != .invalidRequest,
                        "a prefixed key breaks the key rule: \(objectKey.debugDescription)")
                // The URL exactly as the S3 client sends it (path style), then as the server decodes it.
                let endpoint = try! S3Endpoint(url: "http://127.0.0.1:9000")
                let url = S3Client.url(endpoint: endpoint, host: endpoint.hostHeader(bucket: "fuzz"),
                                       path: endpoint.path(bucket: "fuzz", key: objectKey), query: [])
                let path = String(url.dropFirst("http://127.0.0.1:9000".count))
                #expect(path.hasPrefix("/fuzz/"))
                #expect(DotSegments.remove(path) == path, "\(path)")
                let decoded = "/fuzz/" + objectKey
                #expect(DotSegments.remove(decoded) == decoded, "\(decoded.debugDescription)")
            }
        }
    }


    /// Every store refuses what the key rule refuses, whoever calls it (`ferry cp`, presign, triggers).
    @Test func storesAndPresignRefuseKeysTheRuleRefuses() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try LocalObjectStore(root: root)
        let client = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: "http://127.0.0.1:1"), region: "us-east-1",
                                    credentials: AWSCredentials(accessKeyId: "a", secretAccessKey: "b")))
        for key in ["../private/alice/secret.txt", "a/./b", "a//b", "/a", "a/", "x\u{0}y", "line\nbreak", ".."] {
            await #expect(throws: FerryError.self) { _ = try await store.putObject(PutObjectInput(bucket: "fuzz", key: key), body: .bytes([1])) }
            await #expect(throws: FerryError.self) { _ = try await store.headObject(bucket: "fuzz", key: key) }
            await #expect(throws: FerryError.self) { _ = try await client.headObject(bucket: "fuzz", key: key) }
            await #expect(throws: FerryError.self) { _ = try await client.presignedURL(method: "GET", location: ObjectLocation(bucket: "fuzz", key: key), expires: 60) }
            #expect(throws: FerryError.self) { _ = try ObjectLocation(s3URI: "s3://fuzz/\(key)") }
        }
        for bucket in ["..", "../victim", "UP", "fuzz/x"] {
            await #expect(throws: FerryError.self) { _ = try await store.headObject(bucket: bucket, key: "k") }
            await #expect(throws: FerryError.self) { _ = try await client.presignedURL(method: "GET", location: ObjectLocation(bucket: bucket, key: "k"), expires: 60) }
        }
        // A hostile header value never reaches a request.
        let injected = PutObjectInput(bucket: "fuzz", key: "k", metadata: ["note": "a\r\nx-amz-meta-evil: 1"])
        #expect(throws: FerryError.self) { _ = try injected.headerFields() }
        await #expect(throws: FerryError.self) { _ = try await store.putObject(injected, body: .bytes([1])) }
    }

    /// Invariant: a header value that passes validation carries no line break
    /// or control byte once it is a header field.
    @Test func acceptedHeaderValuesArePrintableASCII() async {
        await propertyCheck(count: 2000, input: HostileInput.headerValues, HostileInput.headerValues) { value, other in
            await Task.yield()
            let request = TransferRequest(id: "h", op: .upload, bucket: "fuzz", key: "k", source: "data:,x", contentType: other,
                                          metadata: ["note": value], headers: ["cache-control": value])
            let input = PutObjectInput(bucket: "fuzz", key: "k", contentType: other, metadata: ["note": value],
                                       headers: ["cache-control": value])
            let fields = try? input.headerFields()
            // One rule: what the decoder accepts the stores accept (the decoder also caps metadata at 2 KiB).
            if RequestDecoder.validate(request) == nil { #expect(fields != nil) }
            for (name, field) in fields ?? [] {
                #expect(field.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F })
                #expect(HeaderValueRule.violation(of: field, field: name) == nil)
            }
        }
    }
}

/// RFC 3986 §5.2.4 remove_dot_segments, as an HTTP client or server applies it.
enum DotSegments {
    static func remove(_ path: String) -> String {
        var input = Substring(path)
        var result = ""
        while !input.isEmpty {
            if input.hasPrefix("../") { input = input.dropFirst(3) }
            else if input.hasPrefix("./") { input = input.dropFirst(2) }
            else if input.hasPrefix("/./") { input = "/" + input.dropFirst(3) }
            else if input == "/." { input = "/" }
            else if input.hasPrefix("/../") {
                input = "/" + input.dropFirst(4)
                if let slash = result.lastIndex(of: "/") { result = String(result[..<slash]) } else { result = "" }
            } else if input == "/.." {
                input = "/"
                if let slash = result.lastIndex(of: "/") { result = String(result[..<slash]) } else { result = "" }
            } else if input == "." || input == ".." { input = "" }
            else {
                let start = input.hasPrefix("/") ? input.index(after: input.startIndex) : input.startIndex
                let end = input[start...].firstIndex(of: "/") ?? input.endIndex
                result += input[..<end]
                input = input[end...]
            }
        }
        return result
    }
}
