import FerryCore
import FerryStorage

/// Where the bytes of a `kafka-chunks://` upload come from (the worker reads
/// them from Kafka; the engine does not know Kafka).
public protocol ChunkFetcher: Sendable {
    /// Writes the source's bytes into `descriptor` from offset 0 and returns
    /// their length; every chunk is checked (key, length) and the whole
    /// against the source's size and SHA-256. `progress` counts bytes read.
    func fetch(_ source: ChunkedSource, transferId: String, into descriptor: Int32,
               progress: TransferMeter) async throws(FerryError) -> Int64
}
