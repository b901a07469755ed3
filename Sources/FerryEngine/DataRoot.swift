import FerryCore
import Foundation

/// The directory that `file://` sources and destinations must stay inside.
/// Paths are checked after resolving `..` and symbolic links, so neither can
/// lead a request outside it.
public struct DataRoot: Sendable, Hashable {
    /// The root, resolved (no symbolic links).
    public let path: String

    public init(_ directory: String) throws(ConfigurationError) {
        guard let resolved = Self.realpath(directory) else {
            throw ConfigurationError("data root \(directory) does not exist or is not accessible")
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: resolved, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ConfigurationError("data root \(directory) is not a directory")
        }
        path = resolved
    }

    /// Directories Ferry keeps for itself under the root (the fetch area of
    /// `https://` sources): no request names a file in them, whatever the layout.
    public static let ownDirectories: Set<String> = [".ferry-fetch"]

    /// The existing file a `file://` source names, resolved and inside the
    /// root; with `areas`, inside an area its caller may read, judged on the
    /// path as written first (so a file of another area is refused alike
    /// whether or not it exists) and again once resolved.
    public func sourcePath(_ uri: String, areas: LocalAreas? = nil) throws(FerryError) -> String {
        let raw = try Self.filePath(uri)
        try requireAllowed(.read, lexically: raw, uri: uri, areas: areas)
        guard let resolved = Self.realpath(raw) else {
            // Outside is refused alike whether or not the path exists there: no request learns which do.
            guard contains(raw) else { throw FerryError(.invalidPath, "\(uri) is outside the data root") }
            throw FerryError(.invalidPath, "source \(uri) does not exist")
        }
        try requireInside(resolved, uri: uri)
        try requireAllowed(.read, resolved: resolved, uri: uri, areas: areas)
        var info = stat()
        if stat(resolved, &info) == 0, (info.st_mode & S_IFMT) != S_IFREG {
            throw FerryError(.invalidPath, "source \(uri) is \(Self.fileKind(info.st_mode)); only regular files are transferred")
        }
        return resolved
    }

    /// Whether `candidate` (absolute or relative to the working directory; it
    /// need not exist yet) lies inside the root, the links of its existing
    /// part resolved: a request could then read or replace it.
    public func contains(_ candidate: String) -> Bool {
        Self.resolvedAsFarAsItExists(candidate).map(isInside) ?? false
    }

    /// `candidate` with dot segments removed and the links of its existing
    /// part resolved, its missing rest appended as written.
    private static func resolvedAsFarAsItExists(_ candidate: String) -> String? {
        let components = URL(fileURLWithPath: candidate).standardizedFileURL.path.split(separator: "/").map(String.init)
        guard let (resolved, rest) = resolvingExisting(components) else { return nil }
        return rest.isEmpty ? resolved : (resolved == "/" ? "" : resolved) + "/" + rest.joined(separator: "/")
    }

    /// Where a `file://` destination will be written: the existing part of its
    /// directory resolved, the missing rest appended. Nothing is created here:
    /// `openParentBeneath` creates the missing directories without following a
    /// link, so one swapped in since the request was checked leads nowhere.
    public func destinationPath(_ uri: String, areas: LocalAreas? = nil) throws(FerryError) -> String {
        let raw = try Self.destinationFilePath(uri)
        try requireAllowed(.write, lexically: raw, uri: uri, areas: areas)
        let url = URL(fileURLWithPath: raw)
        let name = url.lastPathComponent
        guard !name.isEmpty, name != "/", name != ".", name != ".." else {
            throw FerryError(.invalidPath, "destination \(uri) names no file")
        }
        let lexicalParent = url.deletingLastPathComponent().standardizedFileURL.path
        try requireInside(lexicalParent, uri: uri)
        guard let parent = Self.resolvedAsFarAsItExists(lexicalParent) else {
            throw FerryError(.invalidPath, "\(uri) is outside the data root")
        }
        try requireInside(parent, uri: uri)
        let path = parent == "/" ? "/\(name)" : "\(parent)/\(name)"
        try requireAllowed(.write, resolved: path, uri: uri, areas: areas)
        return path
    }

    /// Opens the regular file `path` (absolute, inside the root) by walking down
    /// from the root one component at a time with `O_NOFOLLOW`: no symbolic link
    /// is followed anywhere, so a link swapped in after a path was checked cannot
    /// lead outside the root. Returns the file descriptor.
    ///
    /// With `areas` the file must also have one name only: a hard link gives
    /// a file of another area (or Ferry's own) a second name in this one, and
    /// the link count is read from the descriptor, so no rename or new link
    /// after the check changes what is read.
    public func openBeneath(_ path: String, flags: Int32, mode: mode_t = 0o644, areas: LocalAreas? = nil) throws(FerryError) -> Int32 {
        let (directory, name) = try openParentBeneath(path, create: false)
        defer { close(directory) }
        let fd = try Self.openRegularFile(at: directory, name, flags: flags, mode: mode, describedAs: path)
        if areas != nil {
            var info = stat()
            guard fstat(fd, &info) == 0, info.st_nlink <= 1 else {
                close(fd)
                throw FerryError(.accessDenied, "\(path) has \(info.st_nlink) hard links: in a data root laid out by access level "
                    + "a file with several names may be another area's, so only files with one name are read")
            }
        }
        return fd
    }

    /// `openat` that never blocks and never hands out anything but a regular
    /// file: opened with `O_NONBLOCK` (a FIFO without a writer would otherwise
    /// block the open forever), checked with `fstat`, then set back to blocking.
    /// A FIFO, device, socket or directory is `InvalidPath`.
    public static func openRegularFile(at directory: Int32, _ name: String, flags: Int32, mode: mode_t = 0o644,
                                       describedAs path: String) throws(FerryError) -> Int32 {
        let fd = openat(directory, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode)
        guard fd >= 0 else {
            // O_NONBLOCK makes a write-only open of a FIFO without a reader fail with ENXIO.
            if errno == ENXIO { throw FerryError(.invalidPath, "\(path) is not a regular file") }
            throw walkError(path, errno)
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let error = errno
            close(fd)
            throw FerryError(.localIOError, "cannot stat \(path): \(String(cString: strerror(error)))")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw FerryError(.invalidPath, "\(path) is not a regular file (\(fileKind(info.st_mode))); only regular files are transferred")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return fd
    }

    public static func fileKind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFIFO: return "a FIFO"
        case S_IFDIR: return "a directory"
        case S_IFSOCK: return "a socket"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFLNK: return "a symbolic link"
        case S_IFREG: return "a regular file"
        default: return "not a regular file"
        }
    }

    /// Opens the directory that holds `path` by the same walk (creating missing
    /// directories when asked) and returns it with the last component's name,
    /// for `openat` / `renameat` / `unlinkat` relative to it.
    public func openParentBeneath(_ path: String, create: Bool) throws(FerryError) -> (descriptor: Int32, name: String) {
        let prefix = self.path.hasSuffix("/") ? self.path : self.path + "/"
        guard path.hasBytePrefix(prefix) else { throw FerryError(.invalidPath, "\(path) is outside the data root") }
        let components = path.dropFirst(prefix.count).split(separator: "/").map(String.init)
        guard let name = components.last, !components.contains(where: { $0 == ".." || $0 == "." }) else {
            throw FerryError(.invalidPath, "\(path) names no file inside the data root")
        }
        var current = open(self.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard current >= 0 else { throw FerryError(.localIOError, "cannot open the data root: \(String(cString: strerror(errno)))") }
        for component in components.dropLast() {
            var next = openat(current, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if next < 0 && errno == ENOENT && create {
                if mkdirat(current, component, 0o755) != 0 && errno != EEXIST {
                    let error = errno
                    close(current)
                    throw FerryError(.localIOError, "cannot create directory \(component): \(String(cString: strerror(error)))")
                }
                next = openat(current, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            }
            let error = errno
            var kind = stat()
            let seen = fstatat(current, component, &kind, AT_SYMLINK_NOFOLLOW) == 0
            close(current)
            guard next >= 0 else {
                // ENOTDIR is what O_NOFOLLOW gives for a link, and also what a plain file in the way gives.
                if error == ENOTDIR, seen, (kind.st_mode & S_IFMT) != S_IFLNK {
                    throw FerryError(.invalidPath, "\(path): \(component) is \(Self.fileKind(kind.st_mode)), not a directory")
                }
                throw Self.walkError(path, error)
            }
            current = next
        }
        return (current, name)
    }

    static func walkError(_ path: String, _ error: Int32) -> FerryError {
        switch error {
        case ELOOP, ENOTDIR: return FerryError(.invalidPath, "\(path) goes through a symbolic link; refused")
        case ENOENT: return FerryError(.invalidPath, "\(path) does not exist")
        default: return FerryError(.localIOError, "cannot open \(path): \(String(cString: strerror(error)))")
        }
    }

    /// Checks a `file://` destination without creating anything: the nearest
    /// existing ancestor, resolved, must be inside the root, and what remains
    /// below it may not climb with `..`.
    public func checkDestination(_ uri: String, areas: LocalAreas? = nil) throws(FerryError) {
        let raw = try Self.destinationFilePath(uri)
        try requireAllowed(.write, lexically: raw, uri: uri, areas: areas)
        // Plain components, not URL.deletingLastPathComponent(): on a path that
        // ends in "..", that returns the same path, and a walk up never ends.
        var existing = raw.split(separator: "/").map(String.init)
        guard let name = existing.popLast(), name != ".", name != ".." else {
            throw FerryError(.invalidPath, "\(uri) names no file")
        }
        guard let (resolved, above) = Self.resolvingExisting(existing) else {
            throw FerryError(.invalidPath, "\(uri) is outside the data root")
        }
        let rest = above + [name]
        try requireInside(resolved, uri: uri)
        var directory = stat()
        if stat(resolved, &directory) == 0, (directory.st_mode & S_IFMT) != S_IFDIR {
            throw FerryError(.invalidPath, "destination \(uri) lies below \(resolved), which is \(Self.fileKind(directory.st_mode)), not a directory")
        }
        guard !rest.contains("..") else {
            throw FerryError(.invalidPath, "\(uri) is outside the data root or names no file")
        }
        try requireAllowed(.write, resolved: (rest.isEmpty ? resolved : (resolved == "/" ? "" : resolved) + "/" + rest.joined(separator: "/")),
                           uri: uri, areas: areas)
        // What is already there is replaced only when it is a regular file.
        var info = stat()
        if lstat(raw, &info) == 0, (info.st_mode & S_IFMT) != S_IFREG {
            throw FerryError(.invalidPath, "destination \(uri) exists and is \(Self.fileKind(info.st_mode)); only regular files are replaced")
        }
    }

    private func isInside(_ resolved: String) -> Bool {
        resolved.utf8.elementsEqual(path.utf8) || resolved.hasBytePrefix(path.hasSuffix("/") ? path : path + "/")
    }

    /// The components of `path` (absolute, no `.` or `..`) below the root;
    /// nil when it is not below it.
    func components(below path: String) -> [String]? {
        if path.utf8.elementsEqual(self.path.utf8) { return [] }
        let prefix = self.path.hasSuffix("/") ? self.path : self.path + "/"
        guard path.hasBytePrefix(prefix) else { return nil }
        return path.dropFirst(prefix.count).split(separator: "/").map(String.init)
    }

    /// Refuses what the path as written names: a file in Ferry's own
    /// directories, or (with `areas`) one outside the caller's areas. Dot
    /// segments are removed first, so `public/../private/bob` is `private/bob`.
    private func requireAllowed(_ right: AccessRight, lexically raw: String, uri: String, areas: LocalAreas?) throws(FerryError) {
        let standardized = URL(fileURLWithPath: raw).standardizedFileURL.path
        guard let components = components(below: standardized) else { return }  // outside: refused as such later
        try requireAllowed(right, components, uri: uri, areas: areas)
    }

    /// The same for a resolved path (no links), which is what will be opened.
    private func requireAllowed(_ right: AccessRight, resolved: String, uri: String, areas: LocalAreas?) throws(FerryError) {
        guard let components = components(below: resolved) else {
            throw FerryError(.invalidPath, "\(uri) is outside the data root")
        }
        try requireAllowed(right, components, uri: uri, areas: areas)
    }

    private func requireAllowed(_ right: AccessRight, _ components: [String], uri: String, areas: LocalAreas?) throws(FerryError) {
        if let first = components.first, Self.ownDirectories.contains(first) {
            throw FerryError(.accessDenied, "\(uri) lies in \(first), a directory Ferry keeps for itself")
        }
        try areas?.check(right, components, path: uri)
    }

    private func requireInside(_ candidate: String, uri: String) throws(FerryError) {
        guard isInside(candidate) else {
            throw FerryError(.invalidPath, "\(uri) is outside the data root")
        }
    }

    /// The path of a `file:///…` URI (percent-decoded); no other scheme is accepted.
    static func filePath(_ uri: String) throws(FerryError) -> String {
        guard let components = URLComponents(string: uri), components.scheme?.lowercased() == "file" else {
            throw FerryError(.invalidPath, "'\(uri)' is not a file:/// URI")
        }
        guard components.host == nil || components.host == "" || components.host == "localhost" else {
            throw FerryError(.invalidPath, "file URI \(uri) names a remote host")
        }
        let path = components.path
        guard path.hasPrefix("/") else { throw FerryError(.invalidPath, "file URI \(uri) has no absolute path") }
        guard !path.utf8.contains(0) else { throw FerryError(.invalidPath, "file URI \(uri) contains a NUL byte") }
        return path
    }

    /// A destination's path. One that ends in `/` names a directory: it was
    /// written as a file of the directory's name, which no one asking for
    /// `…/dir/` meant; the request has to name the file.
    static func destinationFilePath(_ uri: String) throws(FerryError) -> String {
        let raw = try filePath(uri)
        guard !raw.hasSuffix("/") else {
            throw FerryError(.invalidPath, "destination \(uri) ends in '/' and so names a directory; name the file to write (…/dir/name)")
        }
        return raw
    }

    /// The nearest existing ancestor of an absolute path given as components,
    /// resolved, and the components below it that do not exist (yet).
    static func resolvingExisting(_ components: [String]) -> (resolved: String, rest: [String])? {
        var existing = components
        var rest: [String] = []
        while !existing.isEmpty, realpath("/" + existing.joined(separator: "/")) == nil { rest.insert(existing.removeLast(), at: 0) }
        return realpath("/" + existing.joined(separator: "/")).map { ($0, rest) }
    }

    static func realpath(_ path: String) -> String? {
        guard let resolved = Foundation.realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
