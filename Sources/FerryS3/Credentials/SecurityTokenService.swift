import FerryCore
import FerryStorage
import Foundation

/// The two STS calls Ferry's credential providers make (query API, version
/// 2011-06-15): `AssumeRoleWithWebIdentity` (unsigned: the token is the proof)
/// and `AssumeRole` (signed with the source credentials, service `sts`).
public struct SecurityTokenService: Sendable {
    /// `https://sts.<region>.amazonaws.com` unless overridden
    /// (`AWS_ENDPOINT_URL_STS`, then `AWS_ENDPOINT_URL`, as AWS SDKs read them).
    public var endpoint: String
    public var region: String
    let transport: CurlTransport
    /// The time `AssumeRole` is signed with: STS's, once it refused this machine's.
    public let clock: SigningClock

    public init(endpoint: String? = nil, region: String, transport: CurlTransport, clock: SigningClock? = nil) {
        let endpoint = endpoint ?? "https://sts.\(region).amazonaws.com"
        self.endpoint = endpoint
        self.region = region
        self.transport = transport
        self.clock = clock ?? SigningClock(endpoint: endpoint, peer: "STS", metric: "ferry_sts_clock_offset_seconds")
    }

    /// The endpoint AWS SDKs would use given `environment`.
    public static func endpoint(region: String, environment: [String: String]) -> String {
        for name in ["AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL"] {
            if let url = environment[name], !url.isEmpty { return url }
        }
        return "https://sts.\(region).amazonaws.com"
    }

    public func assumeRoleWithWebIdentity(roleArn: String, sessionName: String, token: String,
                                          durationSeconds: Int?) async throws(FerryError) -> AWSCredentials {
        var parameters = [("Action", "AssumeRoleWithWebIdentity"), ("Version", "2011-06-15"), ("RoleArn", roleArn),
                          ("RoleSessionName", sessionName), ("WebIdentityToken", token)]
        if let durationSeconds { parameters.append(("DurationSeconds", String(durationSeconds))) }
        return try await call("AssumeRoleWithWebIdentity", parameters, signedWith: nil)
    }

    public func assumeRole(roleArn: String, sessionName: String, externalId: String?, durationSeconds: Int?,
                           using source: AWSCredentials) async throws(FerryError) -> AWSCredentials {
        var parameters = [("Action", "AssumeRole"), ("Version", "2011-06-15"), ("RoleArn", roleArn), ("RoleSessionName", sessionName)]
        if let externalId { parameters.append(("ExternalId", externalId)) }
        if let durationSeconds { parameters.append(("DurationSeconds", String(durationSeconds))) }
        return try await call("AssumeRole", parameters, signedWith: source)
    }

    private func call(_ action: String, _ parameters: [(String, String)], signedWith source: AWSCredentials?) async throws(FerryError) -> AWSCredentials {
        guard let url = URLComponents(string: endpoint), let host = url.host, ["http", "https"].contains(url.scheme ?? "") else {
            throw FerryError(.credentialsUnavailable, "\(action): the STS endpoint '\(endpoint)' is not an http(s) URL")
        }
        let body = Array(parameters.map { "\($0.0)=\(SigV4Signer.uriEncode($0.1, keepSlash: false))" }.joined(separator: "&").utf8)
        let target = endpoint.hasSuffix("/") ? endpoint : endpoint + "/"
        var mayCorrectClock = source != nil
        while true {
            var headers = [("content-type", "application/x-www-form-urlencoded; charset=utf-8")]
            let signedAt = clock.now()
            if let source {
                let hostHeader = url.port.map { "\(host):\($0)" } ?? host
                let request = SigV4Signer.Request(method: "POST", host: hostHeader, path: "/", headers: headers,
                                                  payloadHash: Digest.sha256(body).hexString)
                headers = SigV4Signer(credentials: source, region: region, service: "sts").signedHeaders(for: request, at: signedAt)
            }
            let response: HTTPResponse
            do throws(FerryError) {
                response = try await transport.execute(HTTPRequest(method: "POST", url: target, headers: headers, body: .bytes(body)))
            } catch {
                throw FerryError(.credentialsUnavailable, "\(action) at \(endpoint): \(error.message)")
            }
            let fields = XMLFields.parse(response.body, wanted: ["AccessKeyId", "SecretAccessKey", "SessionToken", "Expiration", "Code", "Message"])
            let date = response.date
            guard (200..<300).contains(response.status) else {
                // The server's words, bounded (as S3's are): they go on into logs and statuses.
                let code = fields["Code"].map { TextClip.clipped($0, toUTF8: 128) } ?? "HTTP \(response.status)"
                if mayCorrectClock, let date, let named = Self.clockRefusal(code) {
                    mayCorrectClock = false
                    if clock.correct(signedAt: signedAt, serverDate: date, named: named,
                                     refusal: named ? code : "\(code), dated past 15 minutes from the request") { continue }
                }
                // Refusals (a wrong role, an expired token) will not change by retrying soon; outages might.
                let retried = response.status >= 500 || code == "Throttling" || code == "IDPCommunicationError"
                throw FerryError(retried ? .credentialsUnavailable : .accessDenied,
                                 "\(action) refused by \(endpoint): \(code) \(TextClip.clipped(fields["Message"] ?? "", toUTF8: 1024))")
            }
            guard let id = fields["AccessKeyId"], let secret = fields["SecretAccessKey"], let token = fields["SessionToken"] else {
                throw FerryError(.credentialsUnavailable, "\(action) at \(endpoint) answered without credentials")
            }
            return AWSCredentials(accessKeyId: id, secretAccessKey: secret, sessionToken: token,
                                  expiration: fields["Expiration"].flatMap(CredentialExpiry.parse), sourceTime: date)
        }
    }

    /// Whether an STS refusal may be for the signing time: nil if not; true if
    /// its code says so; false if it may (AWS's STS answers a signature from
    /// a clock past its window with `SignatureDoesNotMatch`, as it answers a
    /// wrong secret), when only the answer's `Date` past the window decides.
    static func clockRefusal(_ code: String) -> Bool? {
        switch code {
        case "RequestTimeTooSkewed", "RequestExpired", "RequestInTheFuture": return true
        case "SignatureDoesNotMatch", "InvalidSignatureException": return false
        default: return nil
        }
    }
}

/// Expiry timestamps as STS and the metadata endpoints write them (ISO 8601, UTC).
enum CredentialExpiry {
    static func parse(_ text: String) -> Date? {
        let plain = ISO8601DateFormatter()
        if let date = plain.date(from: text) { return date }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return fractional.date(from: text)
    }
}
