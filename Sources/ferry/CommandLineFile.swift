import ArgumentParser
import FerryEngine
import Foundation

/// A file named on the command line, read whole, or a usage error that says
/// why it could not be (missing, a directory, unreadable, not UTF-8) rather
/// than only that it could not.
enum CommandLineFile {
    /// `what` names the file's role for the message ("the admin token file").
    static func data(_ path: String, _ what: String = "") throws(ValidationError) -> Data {
        let named = what.isEmpty ? path : "\(what) \(path)"
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw ValidationError("cannot read \(named): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw ValidationError("cannot read \(named): it is \(DataRoot.fileKind(info.st_mode)), not a regular file")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: false)
        do {
            return try handle.readToEnd() ?? Data()
        } catch {
            throw ValidationError("cannot read \(named): \(error.localizedDescription)")
        }
    }

    static func text(_ path: String, _ what: String = "") throws(ValidationError) -> String {
        let bytes = try data(path, what)
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ValidationError("cannot read \(what.isEmpty ? path : "\(what) \(path)"): it is not UTF-8 text")
        }
        return text
    }
}
