import Foundation
import Synchronization

/// A TCP socket listening on 127.0.0.1 at a port the kernel chose, with a
/// thread that hands each accepted connection to `onConnection` until the
/// listener is released.
///
/// The accept thread owns the socket and closes it itself, after `accept`
/// has failed: were `deinit` to close it, its descriptor number could be
/// given to another socket (another test's listener) before the thread's
/// next `accept`, and the thread would then answer that server's clients
/// (a flaky listing test got a stranger's empty 200 that way).
public final class LoopbackListener: Sendable {
    public let port: Int
    private let fd: Int32
    /// Set, under the lock, as the accept thread closes the socket: `deinit`
    /// must not shut down a descriptor number that may already be another's.
    private let closed = Flag()
    private final class Flag: Sendable { let value = Mutex(false) }

    public init(onConnection: @escaping @Sendable (Int32) -> Void) throws {
        (fd, port) = try Self.listenOnLoopback()
        let fd = self.fd, closed = self.closed
        Thread {
            defer { closed.value.withLock { $0 = true; close(fd) } }
            while true {
                let connection = accept(fd, nil, nil)
                if connection >= 0 {
                    _ = fcntl(connection, F_SETFD, FD_CLOEXEC)  // accept4 is not in Swift's Glibc module
                    onConnection(connection)
                } else if errno != EINTR && errno != ECONNABORTED {
                    return  // shut down (EINVAL), or out of descriptors
                }
            }
        }.start()
    }

    /// Wakes the accept thread (its `accept` fails with EINVAL), which then closes the socket.
    deinit { closed.value.withLock { if !$0 { shutdown(fd, Int32(SHUT_RDWR)) } } }

    /// A socket listening on 127.0.0.1 at a port the kernel chose.
    public static func listenOnLoopback() throws -> (fd: Int32, port: Int) {
        // Close-on-exec, as the accepted connections: no child process keeps them open.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else { close(fd); throw CommandFailed(description: "cannot listen on loopback") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }
}
