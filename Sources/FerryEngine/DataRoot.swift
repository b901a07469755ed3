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

    /// The existing file a `file://` source names, resolved and inside the root.
    public func sourcePath(_ uri: String) throws(FerryError) -> String {
        let raw = try Self.filePath(uri)
        guard let resolved = Self.realpath(raw) else {
            throw FerryError(.invalidPath, "source \(uri) does not exist")
        }
        try requireInside(resolved, uri: uri)
        return resolved
    }

    /// Where a `file://` destination will be written: its parent directory is
    /// created inside the root if needed, then resolved and checked.
    public func destinationPath(_ uri: String) throws(FerryError) -> String {
        let raw = try Self.filePath(uri)
        let url = URL(fileURLWithPath: raw)
        let name = url.lastPathComponent
        guard !name.isEmpty, name != "/", name != ".", name != ".." else {
            throw FerryError(.invalidPath, "destination \(uri) names no file")
        }
        // Check the lexical parent first, so no directory is created outside the root.
        let lexicalParent = url.deletingLastPathComponent().standardizedFileURL.path
        try requireInside(lexicalParent, uri: uri, lexicalOnly: true)
        do {
            try FileManager.default.createDirectory(atPath: lexicalParent, withIntermediateDirectories: true)
        } catch {
            throw FerryError(.localIOError, "cannot create directory for \(uri): \(error.localizedDescription)")
        }
        guard let parent = Self.realpath(lexicalParent) else {
            throw FerryError(.invalidPath, "destination directory of \(uri) is not accessible")
        }
        try requireInside(parent, uri: uri)
        return parent == "/" ? "/\(name)" : "\(parent)/\(name)"
    }

    /// Checks a `file://` destination without creating anything: the nearest
    /// existing ancestor, resolved, must be inside the root, and what remains
    /// below it may not climb with `..`.
    public func checkDestination(_ uri: String) throws(FerryError) {
        let raw = try Self.filePath(uri)
        var existing = URL(fileURLWithPath: raw).deletingLastPathComponent()
        var rest: [String] = [URL(fileURLWithPath: raw).lastPathComponent]
        while Self.realpath(existing.path) == nil && existing.path != "/" {
            rest.insert(existing.lastPathComponent, at: 0)
            existing = existing.deletingLastPathComponent()
        }
        guard let resolved = Self.realpath(existing.path) else { throw FerryError(.invalidPath, "\(uri) is outside the data root") }
        try requireInside(resolved, uri: uri)
        guard !rest.contains(".."), let name = rest.last, !name.isEmpty, name != "/", name != "." else {
            throw FerryError(.invalidPath, "\(uri) is outside the data root or names no file")
        }
    }

    private func requireInside(_ candidate: String, uri: String, lexicalOnly: Bool = false) throws(FerryError) {
        let inside = candidate == path || candidate.hasPrefix(path.hasSuffix("/") ? path : path + "/")
        guard inside else {
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

    static func realpath(_ path: String) -> String? {
        guard let resolved = Foundation.realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
