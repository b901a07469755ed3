import FerryCore
import FerryEngine
import FerryTestSupport
import Foundation
import Testing

/// Local paths stay inside the data root, also when a symbolic link is swapped
/// in after a path was checked.
@Suite struct DataRootTests {
    @Test func checkedPathsAndSwappedLinks() throws {
        let base = try TestPaths.temporaryDirectory("dataroot")
        defer { try? FileManager.default.removeItem(at: base) }
        let rootDir = base.appendingPathComponent("root")
        let outside = base.appendingPathComponent("outside")
        try FileManager.default.createDirectory(at: rootDir.appendingPathComponent("in"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        try Data("secret".utf8).write(to: outside.appendingPathComponent("f.txt"))
        try Data("mine".utf8).write(to: rootDir.appendingPathComponent("in/f.txt"))
        let root = try DataRoot(rootDir.path)

        // Checked path is fine, and opens.
        let checked = try root.sourcePath(rootDir.appendingPathComponent("in/f.txt").absoluteString)
        let fd = try root.openBeneath(checked, flags: O_RDONLY)
        close(fd)

        // Now "in" is swapped for a link to the outside: the checked path no longer opens.
        try FileManager.default.removeItem(at: rootDir.appendingPathComponent("in"))
        try FileManager.default.createSymbolicLink(at: rootDir.appendingPathComponent("in"), withDestinationURL: outside)
        do {
            let leaked = try root.openBeneath(checked, flags: O_RDONLY)
            close(leaked)
            Issue.record("opened a file through a swapped-in link")
        } catch {
            #expect(error.code == .invalidPath)
        }
        // Writing through it is refused too, and nothing appears outside.
        do {
            _ = try root.openParentBeneath(rootDir.appendingPathComponent("in/new.txt").path, create: true)
            Issue.record("walked into a swapped-in link")
        } catch {
            #expect(error.code == .invalidPath)
        }
        #expect(!FileManager.default.fileExists(atPath: outside.appendingPathComponent("new.txt").path))

        // Lexical escapes are refused before anything is created.
        #expect(throws: FerryError.self) { try root.checkDestination("file://\(rootDir.path)/../escape.txt") }
        #expect(throws: FerryError.self) { try root.sourcePath("file:///etc/passwd") }
        #expect(throws: FerryError.self) { try root.openParentBeneath("\(rootDir.path)/a/../../x", create: true) }
        #expect(!FileManager.default.fileExists(atPath: base.appendingPathComponent("x").path))
    }

    /// What lies inside the root, for the worker's refusal of its own state,
    /// store and secret files there: paths that do not exist yet, dot
    /// segments and links are resolved; a sibling sharing the root's name as a
    /// prefix is outside.
    @Test func containsResolvesDotsAndLinks() throws {
        let base = try TestPaths.temporaryDirectory("dataroot-contains")
        defer { try? FileManager.default.removeItem(at: base) }
        let rootDir = base.appendingPathComponent("root")
        try FileManager.default.createDirectory(at: rootDir.appendingPathComponent("a"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: base.appendingPathComponent("rootx"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: base.appendingPathComponent("link"), withDestinationURL: rootDir)
        let root = try DataRoot(rootDir.path)
        for inside in [rootDir.path, rootDir.path + "/a", rootDir.path + "/missing/deeper", rootDir.path + "/a/../b",
                       base.path + "/link/state", base.path + "/rootx/../root/x"] {
            #expect(root.contains(inside), "\(inside)")
        }
        for outside in [base.path, base.path + "/rootx/state", "/", base.path + "/root/../elsewhere", base.path + "/missing/root"] {
            #expect(!root.contains(outside), "\(outside)")
        }
    }

    /// Any generated destination (dot segments anywhere, empty segments, odd
    /// bytes, existing and missing directories, links) is decided in bounded
    /// time, and an accepted one is inside the root. A walk up a path ending
    /// in ".." once looped for ever (URL.deletingLastPathComponent is a fixed
    /// point there): the adversarial suite's seed 8916793287572810049. One
    /// ending in `/` is refused (`…/dir/` was written as a file named `dir`).
    @Test(.timeLimit(.minutes(1))) func everyDestinationIsDecidedAndConfined() throws {
        let base = try TestPaths.temporaryDirectory("dataroot-gen")
        defer { try? FileManager.default.removeItem(at: base) }
        let rootDir = base.appendingPathComponent("root")
        try FileManager.default.createDirectory(at: rootDir.appendingPathComponent("out/alice"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: rootDir.appendingPathComponent("link-out"), withDestinationURL: base)
        try Data("f".utf8).write(to: rootDir.appendingPathComponent("out/file"))
        let root = try DataRoot(rootDir.path)
        var rng = HostileInput.rng(seed: 0xD0D0)
        let segments = ["..", ".", "", "out", "alice", "missing", "link-out", "\u{1b}[31m", "'", "a b", "%2e%2e", "ü", "x", "file"]
        for _ in 0..<3000 {
            let count = Int.random(in: 1...7, using: &rng)
            let path = (0..<count).map { _ in segments.randomElement(using: &rng)! }.joined(separator: "/")
            let uri = "file://" + rootDir.path + "/" + path
            if uri.hasSuffix("/") {
                // It names a directory: it was written as a file of that name.
                #expect(throws: FerryError.self, "\(uri)") { try root.checkDestination(uri) }
                #expect(throws: FerryError.self, "\(uri)") { try root.destinationPath(uri) }
            } else if (try? root.checkDestination(uri)) != nil {
                let resolved = try root.destinationPath(uri)
                #expect(resolved.hasPrefix(rootDir.path + "/"), "\(uri) → \(resolved)")
                // The file written is the one the URI names.
                #expect(resolved.split(separator: "/").last == uri.split(separator: "/").last, "\(uri) → \(resolved)")
                // And its directory can be had: what the check accepts, the run does not refuse.
                do {
                    let (directory, _) = try root.openParentBeneath(resolved, create: true)
                    close(directory)
                } catch {
                    Issue.record("\(uri) was accepted, then its directory refused: \(error.message)")
                }
            } else if let resolved = try? root.destinationPath(uri) {
                // The run's own check (a link may have been swapped in since the request's).
                #expect(resolved.hasPrefix(rootDir.path + "/"), "\(uri) → \(resolved)")
            }
        }
        // Deciding created nothing outside the root, not even a directory behind a link.
        #expect(Self.tree(base, skipping: rootDir) == ["root"])
        #expect(throws: FerryError.self) { try root.checkDestination("file://\(rootDir.path)/out/alice//../\u{1b}[31m/'/..") }
    }

    /// Whether a path outside the root exists is none of a request's business:
    /// every generated source that leads outside (by `..`, a link, or plainly)
    /// gets the same answer, existing or not.
    @Test func aSourceOutsideTheRootIsRefusedAlikeWhetherItExistsOrNot() throws {
        let base = try TestPaths.temporaryDirectory("dataroot-oracle")
        defer { try? FileManager.default.removeItem(at: base) }
        let rootDir = base.appendingPathComponent("root")
        try FileManager.default.createDirectory(at: rootDir.appendingPathComponent("in"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: base.appendingPathComponent("secret"), withIntermediateDirectories: true)
        try Data("x".utf8).write(to: base.appendingPathComponent("secret/there.txt"))
        try Data("x".utf8).write(to: rootDir.appendingPathComponent("in/f.txt"))
        try FileManager.default.createSymbolicLink(at: rootDir.appendingPathComponent("link-out"), withDestinationURL: base)
        let root = try DataRoot(rootDir.path)
        var rng = HostileInput.rng(seed: 0x0AC1E)
        let segments = ["..", ".", "in", "f.txt", "link-out", "secret", "there.txt", "missing", "root"]
        var outsideSeen = (existing: 0, missing: 0)
        for _ in 0..<3000 {
            let path = (0..<Int.random(in: 1...6, using: &rng)).map { _ in segments.randomElement(using: &rng)! }.joined(separator: "/")
            let raw = rootDir.path + "/" + path
            guard !root.contains(raw) else { continue }
            if FileManager.default.fileExists(atPath: raw) { outsideSeen.existing += 1 } else { outsideSeen.missing += 1 }
            do {
                _ = try root.sourcePath("file://" + raw)
                Issue.record("\(raw) is outside the root and was accepted")
            } catch {
                #expect(error.message.hasSuffix("is outside the data root"), "\(raw): \(error.message)")
            }
        }
        #expect(outsideSeen.existing > 50 && outsideSeen.missing > 50, "\(outsideSeen)")
        #expect(throws: FerryError.self) { try root.sourcePath("file://\(rootDir.path)/in/missing.txt") }
    }

    /// Every path below `directory`, except what lies below `skipping`.
    static func tree(_ directory: URL, skipping root: URL) -> [String] {
        var found: [String] = []
        let walker = FileManager.default.enumerator(atPath: directory.path)
        while let relative = walker?.nextObject() as? String {
            found.append(relative)
            if directory.path + "/" + relative == root.path { walker?.skipDescendants() }
        }
        return found.sorted()
    }
}
