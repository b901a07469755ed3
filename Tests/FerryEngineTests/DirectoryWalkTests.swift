@testable import FerryEngine
import FerryCore
import FerryTestSupport
import Foundation
import Testing
import FerryConcurrency

/// `ferry cp --recursive`'s walk. The invariant: every regular file under the
/// root is found exactly once, nothing outside it is (links are not followed),
/// and every entry that is not taken is reported with its reason. Trees are
/// generated (seeded; `FERRY_FUZZ_SEED` replays one) and the walk's answer is
/// held both to what was made and to `find -type f`, a walker no one here wrote.
@Suite struct DirectoryWalkTests {
    /// What a generated tree holds, by relative path.
    struct Made {
        var files: Set<String> = []
        var skipped: Set<String> = []  // links, FIFOs, sockets-to-be, names that are not UTF-8
    }

    static let names = ["a", "b.bin", "with space", "percent%41", "hash#q?x", "ünï", "日本", "new\nline", ".hidden", "x" + String(repeating: "y", count: 200),
                        "tab\t", "semi;colon", "+plus", "~tilde"]

    static func makeTree(at root: URL, random: inout SeededGenerator) throws -> Made {
        var made = Made()
        var directories = [""]
        let outside = root.deletingLastPathComponent().appendingPathComponent("outside")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        try Data("outside".utf8).write(to: outside.appendingPathComponent("secret"))
        for step in 0..<Int.random(in: 5...60, using: &random) {
            let parent = directories.randomElement(using: &random)!
            let name = "\(names.randomElement(using: &random)!)-\(step)"
            let relative = parent.isEmpty ? name : parent + "/" + name
            let path = root.path + "/" + relative
            switch Int.random(in: 0..<10, using: &random) {
            case 0...3:
                try Data(repeating: UInt8(step & 0xFF), count: Int.random(in: 0...300, using: &random)).write(to: URL(fileURLWithPath: path))
                made.files.insert(relative)
            case 4, 5:
                guard parent.split(separator: "/").count < 5 else { continue }
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
                directories.append(relative)
            case 6:  // a link to a file, to a directory of the tree, outside, or nowhere
                let target = [outside.path + "/secret", outside.path, root.path, "../" + name, "/nonexistent/\(step)"].randomElement(using: &random)!
                #expect(symlink(target, path) == 0)
                made.skipped.insert(relative)
            case 7:
                #expect(mkfifo(path, 0o644) == 0)
                made.skipped.insert(relative)
            case 8:  // a name that is not UTF-8 (a lone 0xFF byte)
                let name = [0x66, 0xFF, UInt8(0x30 + step % 10)]  // "f", 0xFF, a digit
                let bytes = Array((root.path + "/" + (parent.isEmpty ? "" : parent + "/")).utf8) + name + [0]
                let fd = bytes.map { CChar(bitPattern: $0) }.withUnsafeBufferPointer { open($0.baseAddress!, O_CREAT | O_WRONLY | O_EXCL, 0o644) }
                guard fd >= 0 else { continue }  // the same name twice
                close(fd)
                made.skipped.insert((parent.isEmpty ? "" : parent + "/") + String(decoding: name, as: UTF8.self))
            default:  // an empty directory: nothing to copy, nothing to report
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            }
        }
        return made
    }

    /// `find ROOT -type f -printf '%P\0'`: regular files, links not followed.
    static func findFiles(_ root: URL) throws -> Set<String> {
        let find = Process()
        find.executableURL = URL(fileURLWithPath: "/usr/bin/find")
        find.arguments = [root.path, "-type", "f", "-printf", "%P\\0"]
        let pipe = Pipe()
        find.standardOutput = pipe
        try SpawnLock.holding { try find.run() }
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        find.waitUntilExit()
        #expect(find.terminationStatus == 0)
        // Names that are not UTF-8 are the walk's to report, not to copy.
        return Set(output.split(separator: 0).compactMap { String(validating: Array($0), as: UTF8.self) })
    }

    /// Everything a walk yields, by kind, in the order it came.
    struct Walked {
        var files: [String] = []
        var skipped: [(path: String, reason: String)] = []
        var unreadable: [(path: String, reason: String)] = []
        /// Every path yielded, in order (files, skipped and unreadable alike).
        var order: [String] = []
    }

    static func walk(_ root: String) async throws -> Walked {
        var walked = Walked()
        for await found in try DirectoryWalk.open(root) {
            switch found {
            case .file(let path): walked.files.append(path); walked.order.append(path)
            case .skipped(let path, let reason): walked.skipped.append((path, reason)); walked.order.append(path)
            case .unreadable(let path, let reason): walked.unreadable.append((path, reason)); walked.order.append(path)
            }
        }
        return walked
    }

    @Test func everyRegularFileOnceAndEverythingElseReported() async throws {
        let seed = FuzzReplay.seed
        print("DirectoryWalkTests seed \(seed) (FERRY_FUZZ_SEED=\(seed) replays it)")
        var random = SeededGenerator(seed: seed)
        for tree in 0..<40 {
            let base = try TestPaths.temporaryDirectory("walk")
            defer { try? FileManager.default.removeItem(at: base) }
            let root = base.appendingPathComponent("root")
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            let made = try Self.makeTree(at: root, random: &random)
            let walk = try await Self.walk(root.path)
            #expect(walk.files.count == Set(walk.files).count, "tree \(tree): a file found twice")
            #expect(Set(walk.files) == made.files, "tree \(tree): \(Set(walk.files).symmetricDifference(made.files))")
            #expect(Set(walk.files) == (try Self.findFiles(root)), "tree \(tree): find disagrees")
            // Found as they would be if every path of the tree were sorted at once ("a-c" before "a/b").
            #expect(walk.order == walk.order.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }, "tree \(tree)")
            #expect(Set(walk.skipped.map(\.path)) == made.skipped, "tree \(tree)")
            #expect(walk.skipped.allSatisfy { !$0.reason.isEmpty })
            #expect(walk.unreadable.isEmpty, "tree \(tree): \(walk.unreadable)")
            #expect(!walk.files.contains { $0.contains("secret") || $0.hasPrefix("/") || $0.split(separator: "/").contains("..") })
            await Task.yield()
        }
    }

    @Test func aRootThatIsNoDirectoryIsRefusedAndALinkedRootIsFollowed() async throws {
        let base = try TestPaths.temporaryDirectory("walk-root")
        defer { try? FileManager.default.removeItem(at: base) }
        let file = base.appendingPathComponent("file")
        try Data("x".utf8).write(to: file)
        for (path, says) in [(file.path, "is a regular file, not a directory"),
                             (base.appendingPathComponent("missing").path, "No such file")] {
            do {
                _ = try DirectoryWalk.open(path)
                Issue.record("walked \(path)")
            } catch {
                #expect(error.code == .invalidPath)
                #expect(error.message.contains(says), "\(error.message)")
            }
        }
        // The root the user named may be a link to a directory: it is walked (links under it are not).
        let tree = base.appendingPathComponent("tree")
        try FileManager.default.createDirectory(at: tree, withIntermediateDirectories: true)
        try Data("y".utf8).write(to: tree.appendingPathComponent("inside"))
        #expect(symlink(tree.path, base.appendingPathComponent("link").path) == 0)
        #expect(symlink(base.path, tree.appendingPathComponent("up").path) == 0)
        let walk = try await Self.walk(base.appendingPathComponent("link").path)
        #expect(walk.files == ["inside"])
        #expect(walk.skipped.map(\.path) == ["up"])
    }

    /// The walk holds only the entries of the directories on its current
    /// path: 40 directories of 250 files each (10,000 files) never have more
    /// than one directory's entries and the root's held at once, and the first
    /// file comes before the last directory is read.
    @Test func aTreeIsReadADirectoryAtATime() async throws {
        let base = try TestPaths.temporaryDirectory("walk-wide")
        defer { try? FileManager.default.removeItem(at: base) }
        for d in 0..<40 {
            let directory = base.appendingPathComponent(String(format: "d%02d", d))
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
            for f in 0..<250 { #expect(FileManager.default.createFile(atPath: directory.path + "/f\(f)", contents: nil)) }
        }
        var iterator = try DirectoryWalk.open(base.path).makeAsyncIterator()
        var files = 0, mostHeld = 0
        while let found = await iterator.next() {
            guard case .file = found else { Issue.record("\(found)"); continue }
            files += 1
            mostHeld = max(mostHeld, iterator.held)
        }
        #expect(files == 10_000)
        #expect(mostHeld <= 40 + 250, "the walk held \(mostHeld) entries at once")
    }

    /// A directory's files sort after names that extend its name with a byte
    /// below '/' ("a-c", "a.d", "a b" before "a/b"): the order of the sorted paths.
    @Test func pathsComeInTheOrderOfTheirBytes() async throws {
        let base = try TestPaths.temporaryDirectory("walk-order")
        defer { try? FileManager.default.removeItem(at: base) }
        for directory in ["a", "a/x", "b"] { try FileManager.default.createDirectory(atPath: base.path + "/" + directory, withIntermediateDirectories: false) }
        for file in ["a/b", "a-c", "a.d", "a b", "a/x/y", "a/x-z", "b0", "b/c", "0"] {
            #expect(FileManager.default.createFile(atPath: base.path + "/" + file, contents: nil))
        }
        #expect(try await Self.walk(base.path).files == ["0", "a b", "a-c", "a.d", "a/b", "a/x-z", "a/x/y", "b/c", "b0"])
    }
}
