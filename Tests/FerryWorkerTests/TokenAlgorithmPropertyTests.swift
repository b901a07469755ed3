import FerryCore
import FerryTestSupport
@testable import FerryWorker
import Foundation
import Testing

/// RFC 8725 §3.1, as a property: for every header algorithm × signing key ×
/// signing algorithm (with a drawn kid, `crit` or repeated `alg`), on a worker
/// holding an HMAC secret, an RSA key, an EC key or a JWKS of both kinds, a
/// token is accepted exactly when `TokenForge.accepts` says (a held key,
/// chosen by kid, allows the header's algorithm and signed with it), and every
/// refusal is `AccessDenied` with its reason. Seeded: FERRY_TOKEN_SEED replays.
@Suite struct TokenAlgorithmPropertyTests {
    @Test func onlyAlgorithmsAllowedForTheVerifyingKeyAreAccepted() async throws {
        let seed = ProcessInfo.processInfo.environment["FERRY_TOKEN_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64.max)
        var generator = SeededGenerator(seed: seed)
        let directory = try TestPaths.temporaryDirectory("tokens")
        defer { try? FileManager.default.removeItem(at: directory) }
        let forge = try await TokenForge.make(directory: directory)
        var checked = 0, accepted = 0
        for worker in try forge.workers {
            var configuration = AuthConfiguration()
            configuration.mode = .jwt
            switch worker.flag {
            case "--jwt-secret-file": configuration.hmacSecret = worker.file
            case "--jwt-public-key": configuration.publicKeyPEM = worker.file
            default: configuration.jwksJSON = worker.file
            }
            let verifier = try await IdentityVerifier(configuration)
            for c in TokenForge.cases(using: &generator) {
                let token = try await forge.token(c, subject: "alice")
                let request = TransferRequest(id: "t", op: .delete, bucket: "photos", key: "k", accessLevel: .private,
                                              identityId: "alice", auth: token)
                let expected = TokenForge.accepts(c, worker: worker)
                do {
                    _ = try await verifier.caller(of: request)
                    #expect(expected, "\(worker.name) accepted \(c) (replay with FERRY_TOKEN_SEED=\(seed))")
                    accepted += 1
                } catch {
                    #expect(!expected, "\(worker.name) refused \(c): \(error) (replay with FERRY_TOKEN_SEED=\(seed))")
                    #expect(error.code == .accessDenied && error.message.hasPrefix("identity token refused: "), "\(error)")
                    if c.signature.algorithm != c.headerAlgorithm, !c.critical, !c.repeatedAlgorithm,
                       worker.keys.allSatisfy({ !$0.algorithms.contains(c.headerAlgorithm) }) {
                        #expect(error.message.contains("token algorithm \(c.headerAlgorithm) not allowed for this key")
                                || error.message.contains("kid"), "\(worker.name), \(c): \(error.message)")
                    }
                }
                checked += 1
            }
        }
        print("token property: \(checked) header/key combinations on 4 key setups, \(accepted) accepted (seed \(seed))")
        #expect(checked >= 1000)
        #expect(accepted >= 20, "too few tokens were meant to pass: the property tests little")
    }
}
