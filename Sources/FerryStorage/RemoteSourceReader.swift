import FerryCore

/// Where an upload's `https://` source is read from: the engine asks it
/// whether a URL may be fetched at all (before accepting the request) and
/// then to fetch it into a file. FerryS3's `RemoteSourceFetcher` is the one
/// the worker uses, over its HTTP transport and address policy.
public protocol RemoteSourceReader: Sendable {
    /// Why `url` may not be fetched, or nil when it may.
    func refusal(of url: String) -> FerryError?
    /// Writes the body at `url` into `descriptor` from offset 0; returns its length.
    func fetch(_ url: String, into descriptor: Int32, progress: TransferMeter?) async throws(FerryError) -> Int64
}
