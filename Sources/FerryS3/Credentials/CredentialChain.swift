import FerryCore
import FerryStorage
import Foundation

/// Finds Ferry's own AWS credentials the way AWS SDKs do, first match wins:
///
/// 1. keys given explicitly (flags, `FERRY_*`, the configuration file);
/// 2. `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (/ `AWS_SESSION_TOKEN`);
/// 3. a web identity: `AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN`
///    (+ `AWS_ROLE_SESSION_NAME`) → STS AssumeRoleWithWebIdentity (EKS IRSA);
/// 4. the profile (`--profile`, `AWS_PROFILE`, else `default`) of the shared
///    config and credentials files: `role_arn` with `source_profile`,
///    `credential_source` or `web_identity_token_file` → STS; or
///    `credential_process`; or static keys;
/// 5. the container credentials endpoint (ECS task roles, EKS Pod Identity);
/// 6. EC2 instance metadata (IMDSv2), unless `AWS_EC2_METADATA_DISABLED=true`.
///
/// Choosing a provider reads only the environment and files; the network is
/// used when credentials are first asked for. Temporary credentials are
/// renewed before they expire (`RefreshingCredentialProvider`).
public struct CredentialChain: Sendable {
    public var environment: [String: String]
    public var region: String
    /// STS calls, the container endpoint and instance metadata (with its own
    /// short timeouts) go through it: the process's one transport.
    public var transport: CurlTransport

    public init(environment: [String: String] = ProcessInfo.processInfo.environment, region: String, transport: CurlTransport) {
        self.environment = environment
        self.region = region
        self.transport = transport
    }

    var sts: SecurityTokenService {
        SecurityTokenService(endpoint: SecurityTokenService.endpoint(region: region, environment: environment), region: region,
                             transport: transport)
    }

    /// The provider for this environment. `explicit` keys come first (with
    /// where they came from); `profile` names a profile that must exist.
    public func provider(explicit: (AWSCredentials, source: String)? = nil, profile explicitProfile: String? = nil) throws(FerryError) -> any CredentialProvider {
        if let (keys, source) = explicit { return StaticCredentialProvider(keys, source: source) }
        if let id = environment["AWS_ACCESS_KEY_ID"], !id.isEmpty, let secret = environment["AWS_SECRET_ACCESS_KEY"], !secret.isEmpty {
            let token = environment["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
            return StaticCredentialProvider(AWSCredentials(accessKeyId: id, secretAccessKey: secret, sessionToken: token), source: "environment")
        }
        if let file = environment["AWS_WEB_IDENTITY_TOKEN_FILE"], !file.isEmpty {
            guard let role = environment["AWS_ROLE_ARN"], !role.isEmpty else {
                throw FerryError(.credentialsUnavailable, "AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not")
            }
            return WebIdentityCredentialProvider.make(tokenFile: file, roleArn: role, sessionName: environment["AWS_ROLE_SESSION_NAME"],
                                                      durationSeconds: nil, sts: sts)
        }
        let shared = SharedConfiguration(environment: environment)
        let profile = explicitProfile ?? environment["AWS_PROFILE"].flatMap { $0.isEmpty ? nil : $0 }
        if let provider = try profileProvider(profile ?? "default", shared: shared, visited: []) { return provider }
        if let profile {
            throw FerryError(.credentialsUnavailable, "profile '\(profile)' has no credentials in \(shared.files.joined(separator: " or "))")
        }
        if let endpoint = try ContainerCredentialProvider.endpoint(environment: environment) {
            return ContainerCredentialProvider.make(endpoint: endpoint, environment: environment, transport: transport)
        }
        if let endpoint = InstanceMetadataCredentialProvider.endpoint(environment: environment) {
            return InstanceMetadataCredentialProvider.make(endpoint: endpoint, transport: transport)
        }
        throw FerryError(.credentialsUnavailable, "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a web identity "
            + "(AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN), a profile (AWS_PROFILE), or a container credentials endpoint")
    }

    /// A profile's provider, or nil when it names no credentials.
    func profileProvider(_ name: String, shared: SharedConfiguration, visited: Set<String>) throws(FerryError) -> (any CredentialProvider)? {
        guard let p = shared.profiles[name] else { return nil }
        let label = "profile \(name)"
        let duration = p["duration_seconds"].flatMap(Int.init)
        func staticKeys() -> (any CredentialProvider)? {
            guard let id = p["aws_access_key_id"], let secret = p["aws_secret_access_key"] else { return nil }
            return StaticCredentialProvider(AWSCredentials(accessKeyId: id, secretAccessKey: secret, sessionToken: p["aws_session_token"]),
                                            source: label)
        }
        if let role = p["role_arn"] {
            if let file = p["web_identity_token_file"] {
                return WebIdentityCredentialProvider.make(tokenFile: file, roleArn: role, sessionName: p["role_session_name"],
                                                          durationSeconds: duration, sts: sts, source: "\(label) (web identity)")
            }
            let source: any CredentialProvider
            if let sourceProfile = p["source_profile"] {
                if sourceProfile == name {
                    guard let keys = staticKeys() else { throw FerryError(.credentialsUnavailable, "\(label) is its own source_profile but has no keys") }
                    source = keys
                } else {
                    guard !visited.contains(sourceProfile) else {
                        throw FerryError(.credentialsUnavailable, "\(label): source_profile chain loops through \(sourceProfile)")
                    }
                    guard let found = try profileProvider(sourceProfile, shared: shared, visited: visited.union([name])) else {
                        throw FerryError(.credentialsUnavailable, "\(label): source_profile \(sourceProfile) has no credentials")
                    }
                    source = found
                }
            } else if let kind = p["credential_source"] {
                switch kind {
                case "Environment":
                    guard let id = environment["AWS_ACCESS_KEY_ID"], let secret = environment["AWS_SECRET_ACCESS_KEY"] else {
                        throw FerryError(.credentialsUnavailable, "\(label): credential_source Environment, but AWS_ACCESS_KEY_ID is not set")
                    }
                    source = StaticCredentialProvider(AWSCredentials(accessKeyId: id, secretAccessKey: secret,
                                                                     sessionToken: environment["AWS_SESSION_TOKEN"]), source: "environment")
                case "EcsContainer":
                    guard let endpoint = try ContainerCredentialProvider.endpoint(environment: environment) else {
                        throw FerryError(.credentialsUnavailable, "\(label): credential_source EcsContainer, but no container endpoint is set")
                    }
                    source = ContainerCredentialProvider.make(endpoint: endpoint, environment: environment, transport: transport)
                case "Ec2InstanceMetadata":
                    guard let endpoint = InstanceMetadataCredentialProvider.endpoint(environment: environment) else {
                        throw FerryError(.credentialsUnavailable, "\(label): credential_source Ec2InstanceMetadata, but AWS_EC2_METADATA_DISABLED is set")
                    }
                    source = InstanceMetadataCredentialProvider.make(endpoint: endpoint, transport: transport)
                default:
                    throw FerryError(.credentialsUnavailable, "\(label): unknown credential_source '\(kind)' (Environment, EcsContainer, Ec2InstanceMetadata)")
                }
            } else {
                throw FerryError(.credentialsUnavailable, "\(label) has role_arn but no source_profile, credential_source or web_identity_token_file")
            }
            return AssumeRoleCredentialProvider.make(roleArn: role, sessionName: p["role_session_name"], externalId: p["external_id"],
                                                     durationSeconds: duration, sourceProvider: source, sts: sts,
                                                     source: "\(label) (assume role via \(source.source))")
        }
        if let command = p["credential_process"] {
            return ProcessCredentialProvider.make(command: command, source: "\(label) (credential_process)")
        }
        return staticKeys()
    }
}
