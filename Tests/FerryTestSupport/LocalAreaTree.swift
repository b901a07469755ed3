import Foundation
import Synchronization

/// A data root laid out by access level for the properties of local-file
/// confinement: a file in each area, Ferry's own output and directory, a file
/// at the root and one outside it, and ways from one area into another (a
/// link to bob's private file, a link to his private directory, a hard link
/// of his file into the public area, a hard link of the audit output into
/// alice's private area, a link out of the root).
public enum LocalAreaTree {
    /// The seeds, by path under the data root, with their content.
    public static let seeds: [String: String] = [
        "public/p.txt": "public file",
        "public/swap-real/f.txt": "public swap file",
        "protected/alice/a.txt": "alice protected",
        "protected/bob/b.txt": "bob protected",
        "private/alice/a.txt": "alice private",
        "private/bob/secret.txt": "bob private secret",
        "audit/audit.jsonl": "ferry's own audit output",
        "top.txt": "a file at the root",
    ]
    public static let outsideContent = "outside the data root"

    /// What requests name to read: every seed, the links, Ferry's own
    /// directory, the outside, a spelling of another case, directories.
    public static let readTargets = Array(seeds.keys).sorted() + [
        "public/link-bob", "public/hard-bob", "private/alice/hard-audit", "private/alice/link-out", "public/dirlink/secret.txt",
        "public/swap/f.txt", "../outside/o.txt", ".ferry-fetch/x", "Public/p.txt", "private/bob", "public", "",
    ]
    /// Directories requests name to write a new file into.
    public static let writeDirectories = ["public", "public/new", "protected/alice", "protected/bob", "private/alice", "private/bob",
                                          "private/carol", "audit", "", "../outside", "public/dirlink", "public/swap", ".ferry-fetch",
                                          "protected", "private"]

    /// What each caller may read: its content must be one of these. (Bob's
    /// secret is his, but it also has a name in the public area, so a worker
    /// refuses it to everyone.)
    public static func readable(by caller: String) -> Set<String> {
        var allowed: Set<String> = ["public file", "public swap file", "alice protected", "bob protected"]
        if caller == "alice" { allowed.insert("alice private") }
        if caller == "bob" { allowed.insert("bob private secret") }
        return allowed
    }

    /// Whether `components` (resolved, under the data root) lie where `caller` may write.
    public static func writable(_ components: [String], by caller: String) -> Bool {
        guard components.count >= 2 else { return false }
        if components[0] == "public" { return true }
        return caller != "guest" && ["protected", "private"].contains(components[0]) && components.count >= 3 && components[1] == caller
    }

    /// Builds the tree in `base`; returns the data root (`base/data`) and the outside directory.
    public static func build(in base: URL) throws -> (root: URL, outside: URL) {
        let root = base.appendingPathComponent("data"), outside = base.appendingPathComponent("outside")
        let fm = FileManager.default
        for (path, content) in seeds {
            let url = root.appendingPathComponent(path)
            try fm.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(content.utf8).write(to: url)
        }
        try fm.createDirectory(at: outside, withIntermediateDirectories: true)
        try Data(outsideContent.utf8).write(to: outside.appendingPathComponent("o.txt"))
        try fm.createDirectory(at: root.appendingPathComponent(".ferry-fetch"), withIntermediateDirectories: true)
        try Data("a fetched body".utf8).write(to: root.appendingPathComponent(".ferry-fetch/x"))
        // Ways into other areas: links of both kinds, and a directory swapped with a link while requests run.
        try fm.createSymbolicLink(atPath: root.appendingPathComponent("public/link-bob").path, withDestinationPath: "../private/bob/secret.txt")
        try fm.createSymbolicLink(atPath: root.appendingPathComponent("public/dirlink").path, withDestinationPath: "../private/bob")
        try fm.createSymbolicLink(atPath: root.appendingPathComponent("private/alice/link-out").path, withDestinationPath: outside.appendingPathComponent("o.txt").path)
        for (target, name) in [("private/bob/secret.txt", "public/hard-bob"), ("audit/audit.jsonl", "private/alice/hard-audit")] {
            guard link(root.appendingPathComponent(target).path, root.appendingPathComponent(name).path) == 0 else {
                throw CommandFailed(description: "cannot link \(name)")
            }
        }
        try fm.createSymbolicLink(atPath: root.appendingPathComponent("public/swap-link").path, withDestinationPath: "../private/bob")
        return (root, outside)
    }

    /// Keeps swapping `public/swap` between a real directory (`swap-real`)
    /// and a link to bob's private area (`swap-link`), with renames, until
    /// stopped; each round ends with both back under their own names.
    public final class Swapper: Sendable {
        let directory: URL
        let running = Atomic<Bool>(false)
        public init(_ directory: URL) { self.directory = directory }

        public func start() {
            running.store(true, ordering: .releasing)
            let base = directory.path
            let thread = Thread { [self] in
                while running.load(ordering: .acquiring) {
                    rename("\(base)/swap-real", "\(base)/swap")
                    usleep(2_000)
                    rename("\(base)/swap", "\(base)/swap-real")
                    rename("\(base)/swap-link", "\(base)/swap")
                    usleep(2_000)
                    rename("\(base)/swap", "\(base)/swap-link")
                }
            }
            thread.start()
        }

        public func stop() {
            running.store(false, ordering: .releasing)
            usleep(20_000)
        }
    }
}
