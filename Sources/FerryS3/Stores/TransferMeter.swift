import Synchronization

/// Counts the bytes of one transfer as the transport moves them, and carries
/// the transfer's abort switch: once aborted, every request of the transfer
/// stops at its next chunk of data with `FerryError.cancelled`. A failed
/// request takes back what it counted, so a retry does not count twice.
public final class TransferMeter: Sendable {
    private let total = Atomic<Int64>(0)
    private let aborted = Atomic<Bool>(false)
    private let observer = Mutex<(@Sendable (Int64) -> Void)?>(nil)

    public init() {}

    /// `handler` sees the new total after every change, on transport threads:
    /// keep it cheap. Replaces any earlier observer.
    public func observe(_ handler: @escaping @Sendable (Int64) -> Void) {
        observer.withLock { $0 = handler }
    }

    public var value: Int64 { total.load(ordering: .relaxed) }

    public func add(_ n: Int64) {
        let now = total.add(n, ordering: .relaxed).newValue
        observer.withLock { $0 }?(now)
    }

    public func abort() { aborted.store(true, ordering: .releasing) }
    public var isAborted: Bool { aborted.load(ordering: .acquiring) }
}
