import FerryCore
import FerryStorage
import Foundation

/// EKS IAM roles for service accounts (and any OIDC issuer): the token file
/// the platform keeps fresh is read at every renewal and exchanged with STS
/// `AssumeRoleWithWebIdentity` for temporary credentials.
public enum WebIdentityCredentialProvider {
    public static func make(tokenFile: String, roleArn: String, sessionName: String?, durationSeconds: Int?,
                            sts: SecurityTokenService, source: String = "web-identity") -> RefreshingCredentialProvider {
        let session = sessionName ?? "ferry-\(UInt32.random(in: 0...UInt32.max))"
        return RefreshingCredentialProvider(source: source) { () async throws(FerryError) -> AWSCredentials in
            // Read on every renewal: the platform rotates the token in place.
            guard let token = try? String(contentsOfFile: tokenFile, encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines), !token.isEmpty else {
                throw FerryError(.credentialsUnavailable, "cannot read the web identity token file \(tokenFile)")
            }
            return try await sts.assumeRoleWithWebIdentity(roleArn: roleArn, sessionName: session, token: token,
                                                           durationSeconds: durationSeconds)
        }
    }
}

/// A profile's `role_arn` with `source_profile` or `credential_source`: the
/// source's keys sign STS `AssumeRole` for the role's temporary credentials.
public enum AssumeRoleCredentialProvider {
    public static func make(roleArn: String, sessionName: String?, externalId: String?, durationSeconds: Int?,
                            sourceProvider: any CredentialProvider, sts: SecurityTokenService,
                            source: String) -> RefreshingCredentialProvider {
        let session = sessionName ?? "ferry-\(UInt32.random(in: 0...UInt32.max))"
        return RefreshingCredentialProvider(source: source) { () async throws(FerryError) -> AWSCredentials in
            let keys = try await sourceProvider.credentials()
            return try await sts.assumeRole(roleArn: roleArn, sessionName: session, externalId: externalId,
                                            durationSeconds: durationSeconds, using: keys)
        }
    }
}
