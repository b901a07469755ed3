import FerryCore

/// Says whether the object store is down, after a request got no answer
/// (`FerryError.isStoreNoAnswer`; a source that gives none is not asked about).
/// The engine asks before it retries such a request:
/// retries into a store that is down only wait out more cut-offs. The worker's
/// `StorageGate` and `ferry cp --recursive`'s `StorageBreaker` answer it.
public protocol OutageCheck: Sendable {
    /// True when the store gives no answer either: the transfer ends with
    /// `error` at once, for its caller to wait for the store or stop.
    func confirmsOutage(_ error: FerryError) async -> Bool
}
