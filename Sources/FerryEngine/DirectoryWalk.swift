import FerryCore
import Foundation
import FerryConcurrency

/// The regular files under a directory, for `ferry cp --recursive`, found one
/// directory at a time while the copies run: the walk holds the entries of
/// the directories on its current path, not the whole tree, so a tree of
/// millions of files costs no more than its largest directories.
///
/// Read with `readdir` (its `d_type`, an `lstat` only where the file system
/// gives none), without following symbolic links, so a linked directory cannot
/// lead the walk outside the tree or round a cycle. Everything else it meets is
/// reported with the reason it was not taken, never dropped silently. Each
/// directory is read on the `BlockingPool`.
///
/// (Foundation's `FileManager.enumerator` with a resource value per URL cost
/// about 30 µs a file, all before the first transfer could start.)
public struct DirectoryWalk: AsyncSequence, Sendable {
    public enum Found: Sendable {
        /// A regular file: its path relative to the root, with `/` between components.
        case file(String)
        /// Not a regular file (a link, FIFO, socket, device), or a name that is
        /// not UTF-8: not copied, and why.
        case skipped(path: String, reason: String)
        /// A directory that could not be read: what is under it was not seen.
        case unreadable(path: String, reason: String)
    }

    public typealias Element = Found
    public typealias Failure = Never
    let root: String

    /// The walk of `root` (a directory, or a link to one: the root is what the
    /// user named, so it is followed; nothing under it is). Entries come in
    /// the order of their paths' UTF-8 bytes, so a copy runs in the same order
    /// every time. Throws when the root is not a directory that can be read.
    public static func open(_ root: String) throws(FerryError) -> DirectoryWalk {
        var rootInfo = stat()
        guard stat(root, &rootInfo) == 0 else {
            throw FerryError(.invalidPath, "cannot read directory \(root): \(String(cString: strerror(errno)))")
        }
        guard rootInfo.st_mode & S_IFMT == S_IFDIR else {
            let kind = DataRoot.fileKind(rootInfo.st_mode)
            throw FerryError(.invalidPath, "\(root) is \(kind), not a directory")
        }
        guard access(root, R_OK | X_OK) == 0 else {
            throw FerryError(.invalidPath, "cannot read directory \(root): \(String(cString: strerror(errno)))")
        }
        return DirectoryWalk(root: root)
    }

    public func makeAsyncIterator() -> Iterator { Iterator(root: root) }

    /// Depth first over directories whose entries are sorted with a `/` after
    /// each directory's name: "a/b" then comes after "a-c" ('-' sorts before
    /// '/'), exactly as when every path of the tree is sorted at once.
    public struct Iterator: AsyncIteratorProtocol {
        let root: String
        /// The directories being walked, outermost first; each with its entries still to visit.
        private var path: [(relative: String, entries: ArraySlice<Entry>)] = []
        private var started = false
        /// Entries held now (what the walk costs in memory), for tests.
        var held: Int { path.reduce(0) { $0 + $1.entries.count } }

        init(root: String) { self.root = root }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> Found? {
            if !started {
                started = true
                switch await Self.read(root: root, relative: "") {
                case .success(let entries): path.append(("", entries[...]))
                case .failure(let reason): return .unreadable(path: ".", reason: reason)
                }
            }
            while let top = path.last {
                guard let entry = path[path.count - 1].entries.popFirst() else {
                    path.removeLast()
                    continue
                }
                let child = top.relative.isEmpty ? entry.name : top.relative + "/" + entry.name
                switch entry.kind {
                case .file: return .file(child)
                case .skipped(let reason): return .skipped(path: child, reason: reason)
                case .directory:
                    switch await Self.read(root: root, relative: child) {
                    case .success(let entries): path.append((child, entries[...]))
                    case .failure(let reason): return .unreadable(path: child, reason: reason)
                    }
                }
            }
            return nil
        }

        public mutating func next() async -> Found? { await next(isolation: nil) }

        /// One directory's entries, sorted, or why it cannot be read.
        static func read(root: String, relative: String) async -> ReadResult {
            await BlockingPool.shared.run { readDirectory(root: root, relative: relative) }
        }
    }

    enum ReadResult: Sendable {
        case success([Entry])
        case failure(String)
    }

    struct Entry: Sendable {
        enum Kind: Sendable { case file, directory, skipped(String) }
        var name: String
        var kind: Kind
        /// What the entry sorts by: a directory's name with `/` after it.
        var sortKey: String { if case .directory = kind { name + "/" } else { name } }
    }

    /// Reads the directory at `relative` under `root` (not following a link
    /// there: only the root may be one). Blocks: call it on the BlockingPool.
    static func readDirectory(root: String, relative: String) -> ReadResult {
        BlockingPool.assertOnPoolThread("reading a directory")
        let path = relative.isEmpty ? root : root + "/" + relative
        let fd = Foundation.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (relative.isEmpty ? 0 : O_NOFOLLOW))
        guard fd >= 0, let directory = fdopendir(fd) else {
            let reason = String(cString: strerror(errno))
            if fd >= 0 { close(fd) }
            return .failure(reason)
        }
        defer { closedir(directory) }
        var entries: [Entry] = []
        while true {
            errno = 0
            guard let entry = readdir(directory) else {
                if errno != 0 { return .failure(String(cString: strerror(errno))) }
                break
            }
            let bytes = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            if bytes == [0x2E] || bytes == [0x2E, 0x2E] { continue }  // "." and ".."
            guard let name = String(validating: bytes, as: UTF8.self) else {
                entries.append(Entry(name: String(decoding: bytes, as: UTF8.self),
                                     kind: .skipped("its name is not UTF-8, so it names no object key")))
                continue
            }
            var kind: mode_t
            switch Int32(entry.pointee.d_type) {
            case Int32(DT_REG): kind = S_IFREG
            case Int32(DT_DIR): kind = S_IFDIR
            case Int32(DT_LNK): kind = S_IFLNK
            case Int32(DT_FIFO): kind = S_IFIFO
            case Int32(DT_SOCK): kind = S_IFSOCK
            case Int32(DT_CHR): kind = S_IFCHR
            case Int32(DT_BLK): kind = S_IFBLK
            default:  // DT_UNKNOWN: the file system does not say
                var info = stat()
                guard fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
                    entries.append(Entry(name: name, kind: .skipped(String(cString: strerror(errno)))))
                    continue
                }
                kind = info.st_mode & S_IFMT
            }
            switch kind {
            case S_IFREG: entries.append(Entry(name: name, kind: .file))
            case S_IFDIR: entries.append(Entry(name: name, kind: .directory))
            case S_IFLNK: entries.append(Entry(name: name, kind: .skipped("a symbolic link (links are not followed)")))
            default: entries.append(Entry(name: name, kind: .skipped("\(DataRoot.fileKind(kind)); only regular files are copied")))
            }
        }
        entries.sort { $0.sortKey.utf8.lexicographicallyPrecedes($1.sortKey.utf8) }
        return .success(entries)
    }
}
