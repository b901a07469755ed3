import FerryS3
import FerryStorage

/// HTTP transports for tests, which make their clients and environments
/// directly instead of through the `ferry` command's one transport.
public enum TestHTTP {
    /// Shared by the test process's clients that need no limits of their own.
    public static let transport = CurlTransport()
}

extension S3Client {
    /// A client on a transport of its own, made from the configuration's
    /// timeouts, limits and CA bundle: a test that checks a client's limits
    /// or TLS settings gets exactly those.
    public static func withOwnTransport(_ configuration: Configuration, clock: SigningClock? = nil) -> S3Client {
        S3Client(configuration, transport: CurlTransport(timeouts: configuration.timeouts, limits: configuration.limits,
                                                         caBundle: configuration.caBundle), clock: clock)
    }
}
