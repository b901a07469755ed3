import Synchronization

/// A count that closures running elsewhere (a test server's threads, an
/// engine's callbacks) add to, and the test reads.
public final class SharedCounter: Sendable {
    private let count = Atomic<Int>(0)
    public init() {}
    public func add(_ n: Int = 1) { count.add(n, ordering: .relaxed) }
    public var value: Int { count.load(ordering: .relaxed) }
}
