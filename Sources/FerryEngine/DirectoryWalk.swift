import FerryCore
import Foundation

/// The regular files under a directory, for `ferry cp --recursive`: read with
/// `readdir` (its `d_type`, an `lstat` only where the file system gives none),
/// without following symbolic links, so a linked directory cannot lead the walk
/// outside the tree or round a cycle. Everything else it meets is reported with
/// the reason it was not taken, never dropped silently.
///
/// (Foundation's `FileManager.enumerator` with a resource value per URL cost
/// about 30 µs a file, all before the first transfer could start.)
public struct DirectoryWalk: Sendable {
    /// A file found: its path relative to the root, with `/` between components.
    public var files: [String] = []
    /// Entries that are not regular files (links, FIFOs, sockets, devices) or
    /// whose names are not UTF-8: not copied, and why.
    public var skipped: [(path: String, reason: String)] = []
    /// Directories that could not be read: what is under them was not seen.
    public var unreadable: [(path: String, reason: String)] = []

    /// Walks `root` (a directory, or a link to one: the root is what the user
    /// named, so it is followed; nothing under it is). Files come sorted by
    /// their UTF-8 bytes, so a copy runs in the same order every time.
    public static func regularFiles(under root: String) throws(FerryError) -> DirectoryWalk {
        var walk = DirectoryWalk()
        var rootInfo = stat()
        guard stat(root, &rootInfo) == 0 else {
            throw FerryError(.invalidPath, "cannot read directory \(root): \(String(cString: strerror(errno)))")
        }
        guard rootInfo.st_mode & S_IFMT == S_IFDIR else {
            let kind = rootInfo.st_mode & S_IFMT == S_IFREG ? "a regular file" : DataRoot.fileKind(rootInfo.st_mode)
            throw FerryError(.invalidPath, "\(root) is \(kind), not a directory")
        }
        var pending: [String] = [""]  // relative paths of directories still to read
        while let relative = pending.popLast() {
            let path = relative.isEmpty ? root : root + "/" + relative
            let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (relative.isEmpty ? 0 : O_NOFOLLOW))
            guard fd >= 0, let directory = fdopendir(fd) else {
                let reason = String(cString: strerror(errno))
                if fd >= 0 { close(fd) }
                if relative.isEmpty { throw FerryError(.invalidPath, "cannot read directory \(root): \(reason)") }
                walk.unreadable.append((relative, reason))
                continue
            }
            defer { closedir(directory) }
            while true {
                errno = 0
                guard let entry = readdir(directory) else {
                    if errno != 0 { walk.unreadable.append((relative.isEmpty ? "." : relative, String(cString: strerror(errno)))) }
                    break
                }
                let bytes = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
                if bytes == [0x2E] || bytes == [0x2E, 0x2E] { continue }  // "." and ".."
                guard let name = String(validating: bytes, as: UTF8.self) else {
                    let shown = String(decoding: bytes, as: UTF8.self)
                    walk.skipped.append((relative.isEmpty ? shown : relative + "/" + shown, "its name is not UTF-8, so it names no object key"))
                    continue
                }
                let child = relative.isEmpty ? name : relative + "/" + name
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
                        walk.skipped.append((child, String(cString: strerror(errno))))
                        continue
                    }
                    kind = info.st_mode & S_IFMT
                }
                switch kind {
                case S_IFREG: walk.files.append(child)
                case S_IFDIR: pending.append(child)
                case S_IFLNK: walk.skipped.append((child, "a symbolic link (links are not followed)"))
                default: walk.skipped.append((child, "\(DataRoot.fileKind(kind)); only regular files are copied"))
                }
            }
        }
        walk.files.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        walk.skipped.sort { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }
        return walk
    }
}
