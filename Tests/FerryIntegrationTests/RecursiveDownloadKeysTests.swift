import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// `ferry cp --recursive s3://bucket/prefix/ DIR` on keys that other clients
/// stored: generated keys (seeded) with dot and empty segments, backslashes,
/// control characters, folder markers, and keys that are both a file and a
/// folder. The invariants: nothing is written outside DIR; every file in DIR
/// holds the bytes of the key its path names; every listed key is accounted
/// for (copied, made a folder, or failed with its reason) and the exit status
/// says whether any failed; a key that nothing else contends with is copied.
@Suite struct RecursiveDownloadKeysTests {
    static let segments = ["a", "b", "ü", "日本", " ", "x.y", "...", "..", ".", "", "\u{1}", "\u{7f}", "a\\..\\b", "%2F", "+", "~", "é"]

    static func generatedKeys(seed: UInt64, count: Int) -> [(key: String, body: String)] {
        var rng = SeededGenerator(seed: seed)
        // The prefix's own marker, and keys beside the prefix that must stay where they are.
        var pairs = [("tree/", ""), ("treehouse/x", "not under the prefix"), ("other/secret", "not under the prefix")]
        var seen = Set(pairs.map(\.0))
        for index in 0..<count {
            var key = "tree/" + (0..<Int.random(in: 1...3, using: &rng)).map { _ in Self.segments.randomElement(using: &rng)! }
                .joined(separator: "/")
            // One key in six a folder marker (zero bytes, ending in `/`), one in twenty
            // an object with bytes whose key ends in `/`.
            let roll = Int.random(in: 0..<60, using: &rng)
            if roll < 13 { key += "/" }
            guard seen.insert(key).inserted else { continue }
            pairs.append((key, roll < 10 ? "" : "body \(index) of \(key.debugDescription)"))
        }
        return pairs
    }

    @Test(arguments: [UInt64(0x7EE1), 0x7EE2])
    func noKeyLeavesTheDirectoryAndEveryKeyIsAccountedFor(seed: UInt64) async throws {
        let rgw = try await CephGateway.start()
        let base = try TestPaths.temporaryDirectory("cp-keys-\(seed)")
        do {
            let boto3 = Boto3(rgw)
            try await boto3("create-bucket", "keys")
            let pairs = Self.generatedKeys(seed: seed, count: 160)
            let list = base.appendingPathComponent("keys.json")
            try JSONSerialization.data(withJSONObject: pairs.map { [$0.key, $0.body] }).write(to: list)
            try await boto3("put-keys", "keys", list.path)

            // DIR is base/a/restore; base/a/sibling must be all that stays beside it.
            let directory = base.appendingPathComponent("a/restore")
            try FileManager.default.createDirectory(at: base.appendingPathComponent("a/sibling"), withIntermediateDirectories: true)
            let result = try await runCommand(TestPaths.ferryBinary, ["cp", "--recursive", "s3://keys/tree/", directory.path,
                                                                      "--s3-endpoint", rgw.endpoint],
                                              environment: rgw.clientEnvironment)
            let context: Comment = "\(result.stdout)\n\(result.stderr.suffix(3000))"

            // Nothing outside DIR: base holds keys.json, a/sibling and a/restore only.
            let outside = try FileManager.default.subpathsOfDirectory(atPath: base.path)
                .filter { $0 != "a/restore" && !$0.hasPrefix("a/restore/") }
            #expect(Set(outside) == ["keys.json", "a", "a/sibling"], "\(outside)")

            let listed = pairs.filter { $0.key.hasPrefix("tree/") }
            let bodies = Dictionary(uniqueKeysWithValues: listed.map { ($0.key, $0.body) })
            func isMarker(_ key: String) -> Bool { key.hasSuffix("/") && bodies[key] == "" }
            let files = listed.map(\.key).filter { !isMarker($0) && ObjectKeyRule.violation(of: $0) == nil }
            let folders = listed.map(\.key).filter { isMarker($0) && ($0 == "tree/" || ObjectKeyRule.violation(of: String($0.dropLast())) == nil) }

            // Every file in DIR holds the bytes of the key its path names; every directory
            // is a folder marker's or lies on a copied key's path.
            var filesFound = 0
            let root = directory.path + "/"
            for path in try FileManager.default.subpathsOfDirectory(atPath: directory.path) {
                var isDirectory: ObjCBool = false
                #expect(FileManager.default.fileExists(atPath: root + path, isDirectory: &isDirectory))
                if isDirectory.boolValue {
                    #expect((files + folders).contains { $0.hasPrefix("tree/\(path)/") },
                            "directory \(path.debugDescription) names no key")
                } else {
                    filesFound += 1
                    let key = "tree/" + path
                    #expect(files.contains(key), "file \(path.debugDescription) names no key that may be copied\n\(context)")
                    #expect((try? String(contentsOfFile: root + path, encoding: .utf8)) == bodies[key], "\(path.debugDescription)")
                }
            }

            // A key that no other key contends with (a file where it needs a folder, or
            // a folder where it is a file, either way round) is copied.
            func fileOnItsPath(_ key: String) -> Bool {
                let path = key.dropFirst(5)
                return path.indices.contains { path[$0] == "/" && files.contains("tree/" + path[..<$0]) }
            }
            for key in files where !(files + folders).contains(where: { $0.hasPrefix(key + "/") }) && !fileOnItsPath(key) {
                #expect(FileManager.default.fileExists(atPath: directory.path + "/" + key.dropFirst(5)), "\(key.debugDescription) not copied\n\(context)")
            }
            for marker in folders where !files.contains(String(marker.dropLast())) && !fileOnItsPath(String(marker.dropLast())) {
                var isDirectory: ObjCBool = false
                let path = directory.path + "/" + marker.dropFirst(5)
                #expect(FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue,
                        "marker \(marker.debugDescription) made no folder\n\(context)")
            }

            // The summary accounts for every key listed, and the status for any failure.
            let summary = try #require(result.stdout.split(separator: "\n").first.map(String.init), context)
            let numbers = try #require(summary.wholeMatch(of: /(\d+) objects(?: and (\d+) folders?)?, .*\)(?:, (\d+) failed)?/),
                                       "\(summary)")
            let copied = Int(numbers.1)!, madeFolders = numbers.2.flatMap { Int($0) } ?? 0, failed = numbers.3.flatMap { Int($0) } ?? 0
            #expect(copied == filesFound, context)
            #expect(copied + madeFolders + failed == listed.count, "\(listed.count) keys listed\n\(context)")
            #expect(failed >= listed.count - files.count - folders.count, "every key that names no path fails\n\(context)")
            #expect(result.status == (failed == 0 ? 0 : 1), context)
            #expect(failed == 0 || result.stderr.contains("failed: "), context)
        } catch {
            await rgw.stop()
            throw error
        }
        await rgw.stop()
        try? FileManager.default.removeItem(at: base)
    }
}
