import Foundation

/// A directory the worker creates when missing and writes in (`--state-dir`,
/// `--local-store`), checked where the configuration is read, so that
/// `ferry config check` and `ferry worker` refuse the same paths before
/// anything starts (the worker used to stop after joining Kafka, with
/// Foundation's "The file doesn't exist"). Nothing is created here.
public enum WritableDirectory {
    /// Why `path` cannot serve, or nil: it is a directory this process may
    /// write in, or its nearest existing ancestor is one (then the worker
    /// creates the rest). Root passes permission bits, so for root only a
    /// file in the way, a read-only filesystem or an unreachable path shows.
    public static func problem(_ path: String, option: String) -> String? {
        guard !path.isEmpty else { return "\(option) is empty" }
        guard !path.utf8.contains(0) else { return "\(option) holds a NUL byte" }
        var current = URL(fileURLWithPath: path).standardizedFileURL.path
        while true {
            var info = stat()
            if stat(current, &info) == 0 {
                guard info.st_mode & S_IFMT == S_IFDIR else {
                    return "\(option) \(path): \(current) exists and is not a directory"
                }
                guard access(current, W_OK | X_OK) == 0 else {
                    return "\(option) \(path): cannot write in \(current): \(String(cString: strerror(errno)))"
                }
                return nil
            }
            guard errno == ENOENT, current != "/" else {
                return "\(option) \(path): cannot reach \(current): \(String(cString: strerror(errno)))"
            }
            current = (current as NSString).deletingLastPathComponent
        }
    }
}
