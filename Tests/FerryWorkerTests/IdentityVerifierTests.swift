import FerryCore
@testable import FerryWorker
import Foundation
import JWTKit
import Testing
import FerryConcurrency

/// Identity proof: tokens signed by jwt-kit (and keys made by openssl and
/// Python's cryptography), checked by the worker's verifier.
@Suite struct IdentityVerifierTests {
    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim?
        var nbf: NotBeforeClaim?
        var iss: IssuerClaim?
        var aud: AudienceClaim?
        var uid: String?
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    func request(_ token: String?, identity: String? = "alice") -> TransferRequest {
        TransferRequest(id: "t", op: .delete, bucket: "photos", key: "k", accessLevel: .private, identityId: identity, auth: token)
    }

    func outcome(_ verifier: IdentityVerifier, _ token: String?, identity: String? = "alice") async -> String {
        do { _ = try await verifier.caller(of: request(token, identity: identity)); return "ok" } catch { return error.message }
    }

    func hs256(_ secret: String = "s3cret-s3cret-s3cret-s3cret-0001") async -> JWTKeyCollection {
        await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
    }

    var config: AuthConfiguration {
        var c = AuthConfiguration()
        c.mode = .jwt
        c.hmacSecret = "s3cret-s3cret-s3cret-s3cret-0001"
        return c
    }

    @Test func hs256Rules() async throws {
        var c = config
        c.issuer = "https://id.example.com"
        c.audience = "ferry"
        let verifier = try await IdentityVerifier(c)
        let keys = await hs256()
        let hour: TimeInterval = 3600
        func token(_ claims: Claims, keys: JWTKeyCollection? = nil) async throws -> String {
            let collection: JWTKeyCollection
            if let keys { collection = keys } else { collection = await self.hs256() }
            return try await collection.sign(claims)
        }
        let good = Claims(sub: "alice", exp: .init(value: Date() + hour), iss: "https://id.example.com", aud: "ferry")
        let goodToken = try await keys.sign(good)
        #expect(await outcome(verifier, goodToken) == "ok")

        var expired = good; expired.exp = .init(value: Date() - hour)
        let expiredToken = try await token(expired)
        #expect(await outcome(verifier, expiredToken).contains("expired"))
        var early = good; early.nbf = .init(value: Date() + hour)
        let earlyToken = try await token(early)
        #expect(await outcome(verifier, earlyToken).contains("nbf"))
        var noExp = good; noExp.exp = nil
        let noExpToken = try await token(noExp)
        #expect(await outcome(verifier, noExpToken).contains("no exp"))
        var issuer = good; issuer.iss = "https://evil.example.com"
        let issuerToken = try await token(issuer)
        #expect(await outcome(verifier, issuerToken).contains("issuer"))
        var audience = good; audience.aud = "someone-else"
        let audienceToken = try await token(audience)
        #expect(await outcome(verifier, audienceToken).contains("audience"))
        // Someone else's token for alice's request.
        var bob = good; bob.sub = "bob"
        let bobToken = try await token(bob)
        #expect(await outcome(verifier, bobToken).contains("another identity"))
        // Signed with another secret.
        let forged = try await token(good, keys: await hs256("not-the-secret-not-the-secret-00"))
        #expect(await outcome(verifier, forged).contains("refused"))
        // alg: none, crafted by hand.
        let header = Data(#"{"alg":"none","typ":"JWT"}"#.utf8).base64URLEncodedString()
        let body = Data(#"{"sub":"alice","exp":\#(Int(Date().timeIntervalSince1970 + hour)),"iss":"https://id.example.com","aud":"ferry"}"#.utf8).base64URLEncodedString()
        #expect(await outcome(verifier, "\(header).\(body).").contains("refused"))
        // Missing or garbage.
        #expect(await outcome(verifier, nil).contains("requires identity proof"))
        #expect(await outcome(verifier, "not.a.jwt").contains("refused"))
        #expect(await outcome(verifier, goodToken, identity: nil).contains("identityId is required"))
    }

    @Test func customIdentityClaim() async throws {
        var c = config
        c.identityClaim = "uid"
        let verifier = try await IdentityVerifier(c)
        let token = try await hs256().sign(Claims(sub: "user-123", exp: .init(value: Date() + 600), uid: "alice"))
        #expect(await outcome(verifier, token) == "ok")
    }

    @Test func es256PublicKey() async throws {
        let privateKey = ES256PrivateKey()
        var c = AuthConfiguration()
        c.mode = .jwt
        c.publicKeyPEM = privateKey.publicKey.pemRepresentation
        let verifier = try await IdentityVerifier(c)
        let token = try await JWTKeyCollection().add(ecdsa: privateKey).sign(Claims(sub: "alice", exp: .init(value: Date() + 600)))
        #expect(await outcome(verifier, token) == "ok")
        let other = try await JWTKeyCollection().add(ecdsa: ES256PrivateKey()).sign(Claims(sub: "alice", exp: .init(value: Date() + 600)))
        #expect(await outcome(verifier, other).contains("refused"))
    }

    /// RS256 with a key made by openssl; the same key as a JWKS made by Python's cryptography.
    @Test func rs256PEMAndJWKS() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("jwt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let keyPath = dir.appendingPathComponent("rsa.pem").path
        #expect(try await run("openssl", ["genrsa", "-out", keyPath, "2048"]).status == 0)
        let pubPath = dir.appendingPathComponent("rsa.pub").path
        #expect(try await run("openssl", ["rsa", "-in", keyPath, "-pubout", "-out", pubPath]).status == 0)
        let privatePEM = try String(contentsOfFile: keyPath, encoding: .utf8)
        let signer = try await JWTKeyCollection().add(rsa: Insecure.RSA.PrivateKey(pem: privatePEM), digestAlgorithm: .sha256, kid: "k1")
        let token = try await signer.sign(Claims(sub: "alice", exp: .init(value: Date() + 600)), kid: "k1")

        var pem = AuthConfiguration()
        pem.mode = .jwt
        pem.publicKeyPEM = try String(contentsOfFile: pubPath, encoding: .utf8)
        let pemVerifier = try await IdentityVerifier(pem)
        #expect(await outcome(pemVerifier, token) == "ok")

        let script = """
            import base64, json, sys
            from cryptography.hazmat.primitives import serialization
            key = serialization.load_pem_public_key(open(sys.argv[1], "rb").read()).public_numbers()
            b64 = lambda n: base64.urlsafe_b64encode(n.to_bytes((n.bit_length() + 7) // 8, "big")).rstrip(b"=").decode()
            print(json.dumps({"keys": [{"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig", "n": b64(key.n), "e": b64(key.e)}]}))
            """
        var jwks = AuthConfiguration()
        jwks.mode = .jwt
        jwks.jwksJSON = try await run("python3", ["-c", script, pubPath]).stdout
        let jwksVerifier = try await IdentityVerifier(jwks)
        #expect(await outcome(jwksVerifier, token) == "ok")
    }

    @Test func noneModeTrustsTheProducer() async throws {
        let verifier = try await IdentityVerifier(AuthConfiguration())
        #expect(await outcome(verifier, nil) == "ok")
    }

    @Test func jwtModeWithoutAKeyIsAConfigurationError() async {
        var c = AuthConfiguration()
        c.mode = .jwt
        await #expect(throws: ConfigurationError.self) { _ = try await IdentityVerifier(c) }
    }

    func run(_ tool: String, _ arguments: [String]) async throws -> (status: Int32, stdout: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try SpawnLock.holding { try process.run() }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        while process.isRunning { try await Task.sleep(for: .milliseconds(20)) }
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

extension Data {
    func base64URLEncodedString() -> String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
