import FerryCore
@testable import FerryS3
import FerryTestSupport
import Foundation
import Synchronization
import Testing

/// Temporary keys' expiry is written on their source's clock (STS, instance
/// metadata, the container endpoint). On a machine whose clock is off, it is
/// reckoned by that clock, so the keys are renewed before the store stops
/// taking them, and not at every request; STS's own refusal of this
/// machine's time is corrected as S3's is.
@Suite(.serialized) struct CredentialClockTests {
    @Test func anExpiryMovesOntoThisMachinesClockOnlyWhenTheSourcesIsFarOff() {
        let received = Date(timeIntervalSince1970: 1_800_000_000)
        func keys(sourceOffset: TimeInterval?) -> AWSCredentials {
            let sourceNow = sourceOffset.map { received.addingTimeInterval($0) }
            return AWSCredentials(accessKeyId: "ASIA", secretAccessKey: "s", sessionToken: "t",
                                  expiration: (sourceNow ?? received).addingTimeInterval(3600), sourceTime: sourceNow)
        }
        // No `Date` (a credential_process), or a source within a minute: the expiry as written.
        for offset: TimeInterval? in [nil, 0, 30, -50] {
            let (moved, by) = RefreshingCredentialProvider.onLocalClock(keys(sourceOffset: offset), receivedAt: received)
            #expect(by == 0 && moved == keys(sourceOffset: offset), "\(String(describing: offset))")
        }
        // Two hours ahead or behind, or ten minutes: the hour the source gave, from now on this machine's clock.
        for offset: TimeInterval in [7200, -7200, 600, -600] {
            let (moved, by) = RefreshingCredentialProvider.onLocalClock(keys(sourceOffset: offset), receivedAt: received)
            #expect(abs(by - offset - 0.5) < 0.001, "\(offset): \(by)")
            #expect(abs(moved.expiration!.timeIntervalSince(received) - 3599.5) < 0.001, "\(offset): \(moved.expiration!)")
        }
        // Long-term keys have no expiry to move.
        let longTerm = AWSCredentials(accessKeyId: "AKIA", secretAccessKey: "s", sourceTime: received.addingTimeInterval(7200))
        #expect(RefreshingCredentialProvider.onLocalClock(longTerm, receivedAt: received).credentials.expiration == nil)
    }

    /// Role keys from Ceph's STS for 15 minutes, on a machine 20 minutes
    /// behind the gateway: STS and S3 first refuse its signatures
    /// (RequestTimeTooSkewed), then take them. Sixteen minutes later (the
    /// gateway's clock and the client's both moved on), the gateway refuses
    /// the first keys; the client has renewed them before its request,
    /// because it reckons their end by STS's clock. By its own clock they had
    /// 19 minutes left.
    @Test(.enabled(if: (CephGateway.isInstalled && FileManager.default.fileExists(atPath: "/usr/bin/faketime"))
                       || ProcessInfo.processInfo.environment["CI"] != nil))
    func roleKeysAreRenewedByTheirSourcesClockOnCeph() async throws {
        let rgw = try await CephGateway.start(sts: true, movableClock: true)
        do {
            let roleArn = try #require(rgw.roleArn)
            let shift = Mutex<TimeInterval>(-1200)
            let local: @Sendable () -> Date = { Date().addingTimeInterval(shift.withLock { $0 }) }
            let endpoint = try S3Endpoint(url: rgw.endpoint)
            let transport = CurlTransport()
            let user = AWSCredentials(accessKeyId: rgw.accessKeyId, secretAccessKey: rgw.secretAccessKey)
            try await S3Client(.init(endpoint: endpoint, region: "us-east-1", credentials: user)).createBucket("roles")

            let sts = SecurityTokenService(endpoint: rgw.endpoint, region: "us-east-1", transport: transport,
                                           clock: SigningClock(endpoint: rgw.endpoint, peer: "STS", localTime: local))
            let assumed = Mutex<Int>(0)
            let provider = RefreshingCredentialProvider(source: "role ferry on rgw", localTime: local) { () async throws(FerryError) -> AWSCredentials in
                assumed.withLock { $0 += 1 }
                return try await sts.assumeRole(roleArn: roleArn, sessionName: "ferry-test", externalId: nil,
                                                durationSeconds: 900, using: user)
            }
            let s3 = S3Client(.init(endpoint: endpoint, region: "us-east-1", credentialProvider: provider), transport: transport,
                              clock: SigningClock(endpoint: rgw.endpoint, localTime: local))
            let bytes = Array("signed by a role".utf8)
            _ = try await s3.putObject(PutObjectInput(bucket: "roles", key: "first"), body: .bytes(bytes))
            #expect(abs(sts.clock.offset - 1200) < 5, "STS learned \(sts.clock.offset)")
            #expect(abs(s3.clock.offset - 1200) < 5, "S3 learned \(s3.clock.offset)")
            let first = try await provider.credentials()
            let left = try #require(first.expiration).timeIntervalSince(local())
            #expect(abs(left - 900) < 30, "the 15 minutes STS gave, on this machine's clock: \(left) s")

            // Sixteen minutes pass, for the gateway and for the client.
            try await rgw.moveClock(to: 960)
            shift.withLock { $0 += 960 }
            _ = try await s3.putObject(PutObjectInput(bucket: "roles", key: "second"), body: .bytes(bytes))
            let second = try await provider.credentials()
            #expect(second.accessKeyId != first.accessKeyId)
            #expect(assumed.withLock { $0 } == 2)
            #expect(try await s3.headObject(bucket: "roles", key: "second")?.size == Int64(bytes.count))

            // The test's premise: the gateway no longer takes the first keys.
            let stale = S3Client(.init(endpoint: endpoint, region: "us-east-1", credentials: first), transport: transport,
                                 clock: SigningClock(endpoint: rgw.endpoint, localTime: local))
            do {
                _ = try await stale.putObject(PutObjectInput(bucket: "roles", key: "stale"), body: .bytes(bytes))
                Issue.record("the gateway took keys past their expiry")
            } catch {
                #expect(error.code == .accessDenied, "\(error)")
            }
        } catch {
            await rgw.stop()
            throw error
        }
        await rgw.stop()
    }
}
