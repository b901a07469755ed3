import FerryCore
import FerryStorage
import Foundation

/// ECS task roles and EKS Pod Identity: credentials from the container
/// credentials endpoint (`AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` under
/// 169.254.170.2, or `AWS_CONTAINER_CREDENTIALS_FULL_URI`), with the
/// authorization token of `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` (read at
/// every renewal: the platform rotates it) or `AWS_CONTAINER_AUTHORIZATION_TOKEN`.
public enum ContainerCredentialProvider {
    struct Document: Decodable {
        var AccessKeyId: String
        var SecretAccessKey: String
        var Token: String?
        var Expiration: String?
    }

    /// The endpoint the environment names, or nil. A full URI must be https,
    /// or http to a loopback address or to the ECS/EKS link-local agents, as AWS SDKs require.
    public static func endpoint(environment: [String: String]) throws(FerryError) -> String? {
        if let relative = environment["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"], !relative.isEmpty {
            return "http://169.254.170.2" + (relative.hasPrefix("/") ? relative : "/" + relative)
        }
        guard let full = environment["AWS_CONTAINER_CREDENTIALS_FULL_URI"], !full.isEmpty else { return nil }
        guard let url = URLComponents(string: full), let host = url.host else {
            throw FerryError(.credentialsUnavailable, "AWS_CONTAINER_CREDENTIALS_FULL_URI is not a URL")
        }
        let allowed = url.scheme == "https" || (url.scheme == "http"
            && (host == "localhost" || host.hasPrefix("127.") || host == "[::1]" || host == "::1"
                || host == "169.254.170.2" || host == "169.254.170.23" || host == "[fd00:ec2::23]" || host == "fd00:ec2::23"))
        guard allowed else {
            throw FerryError(.credentialsUnavailable, "AWS_CONTAINER_CREDENTIALS_FULL_URI must be https, or http to a loopback or the container agent's address")
        }
        return full
    }

    public static func make(endpoint: String, environment: [String: String], transport: CurlTransport) -> RefreshingCredentialProvider {
        RefreshingCredentialProvider(source: "container") { () async throws(FerryError) -> AWSCredentials in
            var headers: [(String, String)] = []
            if let file = environment["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"], !file.isEmpty {
                guard let token = try? String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines) else {
                    throw FerryError(.credentialsUnavailable, "cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE \(file)")
                }
                headers.append(("authorization", token))
            } else if let token = environment["AWS_CONTAINER_AUTHORIZATION_TOKEN"], !token.isEmpty {
                headers.append(("authorization", token))
            }
            let response: HTTPResponse
            do throws(FerryError) {
                response = try await transport.execute(HTTPRequest(method: "GET", url: endpoint, headers: headers))
            } catch {
                throw FerryError(.credentialsUnavailable, "container credentials endpoint: \(error.message)")
            }
            guard response.status == 200, let document = try? JSONDecoder().decode(Document.self, from: Data(response.body)) else {
                throw FerryError(.credentialsUnavailable, "container credentials endpoint answered HTTP \(response.status) without credentials")
            }
            return AWSCredentials(accessKeyId: document.AccessKeyId, secretAccessKey: document.SecretAccessKey,
                                  sessionToken: document.Token, expiration: document.Expiration.flatMap(CredentialExpiry.parse),
                                  sourceTime: response.date)
        }
    }
}
