import Synchronization

/// Counts the bytes of one transfer as the transport moves them, and carries
/// the transfer's abort switch: once aborted, every request of the transfer
/// stops at its next chunk of data with `FerryError.cancelled`. A failed
/// request takes back what it counted, so a retry does not count twice.
public final class TransferMeter: Sendable {
    private let total = Atomic<Int64>(0)
    private let aborted = Atomic<Bool>(false)
    /// Boxed: reading a closure straight out of a Mutex re-abstracts it and writes
    /// it back wrapped in two more thunks, so every `add` would walk a chain that
    /// grows with every call (measured: 60% of a download's CPU before the box).
    private let observer = Mutex<Observer?>(nil)

    private final class Observer: Sendable {
        let handler: @Sendable (Int64) -> Void
        init(_ handler: @escaping @Sendable (Int64) -> Void) { self.handler = handler }
    }

    public init() {}

    /// `handler` sees the new total after every change, on transport threads:
    /// keep it cheap. Replaces any earlier observer.
    public func observe(_ handler: @escaping @Sendable (Int64) -> Void) {
        observer.withLock { $0 = Observer(handler) }
    }

    /// Drops the observer. The engine does this when a transfer ends: the
    /// observer holds the transfer's run, which holds the control that holds
    /// this meter, a cycle that kept every finished transfer in memory.
    public func stopObserving() {
        observer.withLock { $0 = nil }
    }

    public var value: Int64 { total.load(ordering: .relaxed) }

    public func add(_ n: Int64) {
        let now = total.add(n, ordering: .relaxed).newValue
        observer.withLock { $0 }?.handler(now)
    }

    public func abort() { aborted.store(true, ordering: .releasing) }
    public var isAborted: Bool { aborted.load(ordering: .acquiring) }
}
