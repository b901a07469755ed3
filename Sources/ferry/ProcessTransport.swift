import FerryS3
import FerryStorage

/// The one place a `ferry` process makes its HTTP transport (and so its
/// curl event-loop threads). Everything that talks HTTP in the process (the
/// store, STS and the metadata endpoints, https sources, webhooks, the
/// triggers' object store) is handed this one, so `--max-connections` and
/// `--max-buffered-bytes` bound the whole process.
enum ProcessTransport {
    static func make(limits: CurlTransport.Limits = .init(), caBundle: String? = nil) -> CurlTransport {
        CurlTransport(limits: limits, caBundle: caBundle)
    }
}
