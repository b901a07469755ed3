import FerryCore
import FerryStorage
import Foundation

/// EC2 instance profiles through IMDSv2: a session token (`PUT
/// /latest/api/token`), the role name, then its credentials. The endpoint is
/// `AWS_EC2_METADATA_SERVICE_ENDPOINT` or http://169.254.169.254;
/// `AWS_EC2_METADATA_DISABLED=true` turns the provider off.
public enum InstanceMetadataCredentialProvider {
    struct Document: Decodable {
        var Code: String?
        var AccessKeyId: String
        var SecretAccessKey: String
        var Token: String?
        var Expiration: String?
    }

    public static func endpoint(environment: [String: String]) -> String? {
        if environment["AWS_EC2_METADATA_DISABLED"]?.lowercased() == "true" { return nil }
        let base = environment["AWS_EC2_METADATA_SERVICE_ENDPOINT"].flatMap { $0.isEmpty ? nil : $0 } ?? "http://169.254.169.254"
        return base.hasSuffix("/") ? String(base.dropLast()) : base
    }

    /// Instance metadata answers on the local link or not at all: its requests
    /// give up on a connection after a second and on a silent answer after five,
    /// through the process's one transport.
    public static let timeouts: CurlTransport.Timeouts = {
        var timeouts = CurlTransport.Timeouts()
        timeouts.connectSeconds = 1
        timeouts.lowSpeedSeconds = 5
        return timeouts
    }()

    public static func make(endpoint: String, transport: CurlTransport) -> RefreshingCredentialProvider {
        RefreshingCredentialProvider(source: "instance-metadata") { () async throws(FerryError) -> AWSCredentials in
            func call(_ method: String, _ path: String, _ headers: [(String, String)]) async throws(FerryError) -> (text: String, date: Date?) {
                let response: HTTPResponse
                do throws(FerryError) {
                    var request = HTTPRequest(method: method, url: endpoint + path, headers: headers)
                    request.timeouts = timeouts
                    response = try await transport.execute(request)
                } catch {
                    throw FerryError(.credentialsUnavailable, "instance metadata \(path): \(error.message)")
                }
                guard response.status == 200 else {
                    throw FerryError(.credentialsUnavailable, "instance metadata \(path) answered HTTP \(response.status)")
                }
                return (String(decoding: response.body, as: UTF8.self), response.date)
            }
            let token = try await call("PUT", "/latest/api/token", [("x-aws-ec2-metadata-token-ttl-seconds", "21600")]).text
            let auth = [("x-aws-ec2-metadata-token", token)]
            let roles = try await call("GET", "/latest/meta-data/iam/security-credentials/", auth).text
            guard let role = roles.split(whereSeparator: \.isNewline).first.map(String.init), !role.isEmpty else {
                throw FerryError(.credentialsUnavailable, "this instance has no IAM role")
            }
            let (body, date) = try await call("GET", "/latest/meta-data/iam/security-credentials/\(role)", auth)
            guard let document = try? JSONDecoder().decode(Document.self, from: Data(body.utf8)), document.Code ?? "Success" == "Success" else {
                throw FerryError(.credentialsUnavailable, "instance metadata credentials of role \(role) are not usable")
            }
            return AWSCredentials(accessKeyId: document.AccessKeyId, secretAccessKey: document.SecretAccessKey,
                                  sessionToken: document.Token, expiration: document.Expiration.flatMap(CredentialExpiry.parse),
                                  sourceTime: date)
        }
    }
}
