import Foundation

/// What a copy is called when its destination names a folder, as `cp` and
/// `aws s3 cp` have it: `s3://bucket`, `s3://bucket/dir/`, a path ending in
/// `/` or an existing directory receive the source under its own name.
enum CopyDestination {
    /// The last segment of a key or a path; nil when there is none to use.
    static func name(of keyOrPath: String) -> String? {
        guard let last = keyOrPath.split(separator: "/").last.map(String.init), last != ".", last != ".." else { return nil }
        return last
    }

    /// The name a source gives its copy: an `s3://` object's last key segment, a
    /// local path's or `file://` URI's last component; nil for sources without
    /// one (`data:`, `https://`).
    static func name(ofSource source: String) -> String? {
        if source.hasPrefix("s3://") { return name(of: String(source.dropFirst(5).drop { $0 != "/" })) }
        if source.hasPrefix("file://") { return URL(string: source).flatMap { name(of: $0.path) } }
        return source.hasPrefix("data:") || source.contains("://") ? nil : name(of: source)
    }

    /// `s3://bucket` or `s3://bucket/dir/` with the source's name appended; any other URI as it is.
    static func object(_ destination: String, sourceName: String?) -> String {
        guard let sourceName, destination.count > 5 else { return destination }
        if !destination.dropFirst(5).contains("/") { return destination + "/" + sourceName }
        return destination.hasSuffix("/") ? destination + sourceName : destination
    }

    /// A path ending in `/` (or, with `existingDirectory`, naming one) with the
    /// source's name appended; any other path as it is. The workers' file
    /// system may not be this one, so `ferry enqueue` looks at the `/` only.
    static func path(_ destination: String, sourceName: String?, existingDirectory: Bool) -> String {
        guard let sourceName else { return destination }
        if destination.hasSuffix("/") { return destination + sourceName }
        var isDirectory: ObjCBool = false
        if existingDirectory, !destination.hasPrefix("file:"),
           FileManager.default.fileExists(atPath: destination, isDirectory: &isDirectory), isDirectory.boolValue {
            return destination + "/" + sourceName
        }
        return destination
    }
}
