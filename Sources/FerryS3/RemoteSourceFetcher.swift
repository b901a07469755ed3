import FerryCore
import FerryStorage
import Foundation

/// Downloads `https://` upload sources (e.g. a presigned GET) into a local file,
/// under a `RemoteSourcePolicy`: redirects are followed one hop at a time, each
/// hop's URL and resolved address checked again.
public final class RemoteSourceFetcher: RemoteSourceReader {
    public let policy: RemoteSourcePolicy
    private let transport: CurlTransport

    /// Fetches share `transport`, the process's one, and its limits with the worker's other requests.
    public init(policy: RemoteSourcePolicy, transport: CurlTransport) {
        self.policy = policy
        self.transport = transport
    }

    /// Writes the body into `descriptor` from offset 0; returns its length.
    /// Its failures are marked as the source's (`FerryError.isSourceFailure`):
    /// a source that does not answer is no sign that the store is down.
    public func fetch(_ url: String, into descriptor: Int32, progress: TransferMeter?) async throws(FerryError) -> Int64 {
        do throws(FerryError) {
            return try await fetchFollowingRedirects(url, into: descriptor, progress: progress)
        } catch {
            var failure = error
            failure.isSourceFailure = true
            throw failure
        }
    }

    private func fetchFollowingRedirects(_ url: String, into descriptor: Int32, progress: TransferMeter?) async throws(FerryError) -> Int64 {
        var current = url
        for _ in 0...policy.maxRedirects {
            if let refusal = policy.refusal(of: current, what: "source") { throw refusal }
            let components = URLComponents(string: current) ?? URLComponents()
            guard ftruncate(descriptor, 0) == 0 else { throw FerryError(.localIOError, "cannot reset the source file") }
            var request = HTTPRequest(method: "GET", url: current, response: .file(descriptor: descriptor, offset: 0),
                                      progress: progress)
            request.addressPolicy = policy
            let response = try await transport.execute(request)
            switch response.status {
            case 200..<300:
                return response.bodyLength
            case 301, 302, 303, 307, 308:
                guard let location = response.header("location"),
                      let next = URL(string: location, relativeTo: URL(string: current))?.absoluteURL.absoluteString else {
                    throw FerryError(.storageError, "source redirect without a usable Location")
                }
                current = next
            default:
                let where_ = "\(components.scheme ?? "")://\(components.host ?? "")\(components.path)"
                throw FerryError(response.status == 403 ? .accessDenied : .storageError,
                                 "source \(where_) answered HTTP \(response.status)")
            }
        }
        throw FerryError(.forbiddenSource, "source redirected more than \(policy.maxRedirects) times")
    }
}

extension RemoteSourceFetcher {
    public func refusal(of url: String) -> FerryError? { policy.refusal(of: url, what: "source") }
}
