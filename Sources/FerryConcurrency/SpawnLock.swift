import Foundation

/// Keeps a child's spawn and a mock broker's down apart.
///
/// A spawned child holds a copy of every descriptor of this process from
/// the moment it is created until it execs (close-on-exec acts only then).
/// librdkafka's mock cluster sets a broker down by closing its listener and
/// binding the port again at once, and aborts the process when that bind
/// fails. A child spawned in between still holds the listening socket, so
/// the bind finds the port in use: seen as `rdkafka_mock.c:2100` in a CI run,
/// and reproduced by spawning `/bin/true` in a loop beside down/up rounds.
/// `posix_spawn` returns once the child has exec'd, so holding this lock
/// around each spawn and each down/up leaves no child half-made while a
/// broker's port is rebound.
public enum SpawnLock {
    private static let lock = NSLock()

    /// Runs `body` (a spawn, or a broker's down/up) with no other running.
    public static func holding<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}
