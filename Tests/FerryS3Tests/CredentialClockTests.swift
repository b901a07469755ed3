import FerryCore
@testable import FerryLocalStore
@testable import FerryS3
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Logging
import Synchronization
import Testing

/// Temporary keys' expiry is written on their source's clock (STS, instance
/// metadata, the container endpoint). On a machine whose clock is off, it is
/// reckoned by that clock, so the keys are renewed before the store stops
/// taking them, and not at every request; STS's own refusal of this
/// machine's time is corrected as S3's is.
@Suite(.serialized) struct CredentialClockTests {
    @Test func anExpiryMovesOntoThisMachinesClockByTheSourcesDate() {
        let received = Date(timeIntervalSince1970: 1_800_000_000)
        func keys(sourceOffset: TimeInterval?) -> AWSCredentials {
            let sourceNow = sourceOffset.map { received.addingTimeInterval($0) }
            return AWSCredentials(accessKeyId: "ASIA", secretAccessKey: "s", sessionToken: "t",
                                  expiration: (sourceNow ?? received).addingTimeInterval(3600), sourceTime: sourceNow)
        }
        // No `Date` (a credential_process runs on this machine): the expiry as written.
        let (kept, none) = RefreshingCredentialProvider.onLocalClock(keys(sourceOffset: nil), receivedAt: received)
        #expect(none == 0 && kept == keys(sourceOffset: nil))
        // Two hours ahead or behind, ten minutes, half a minute, none: the hour the source gave, from now on this machine's clock.
        for offset: TimeInterval in [7200, -7200, 600, -600, 30, -50, 0] {
            let (moved, by) = RefreshingCredentialProvider.onLocalClock(keys(sourceOffset: offset), receivedAt: received)
            #expect(abs(by - offset - 0.5) < 0.001, "\(offset): \(by)")
            #expect(abs(moved.expiration!.timeIntervalSince(received) - 3599.5) < 0.001, "\(offset): \(moved.expiration!)")
        }
        // A `Date` that is not the expiry's clock (a year 9999 or 1970 from a broken proxy): the expiry as written.
        for bogus in [Date(timeIntervalSince1970: 253_402_300_799), Date(timeIntervalSince1970: 0)] {
            var keys = keys(sourceOffset: nil)
            keys.sourceTime = bogus
            let (kept, by) = RefreshingCredentialProvider.onLocalClock(keys, receivedAt: received)
            #expect(by == 0 && kept.expiration == keys.expiration, "\(bogus)")
        }
        // Long-term keys have no expiry to move.
        let longTerm = AWSCredentials(accessKeyId: "AKIA", secretAccessKey: "s", sourceTime: received.addingTimeInterval(7200))
        #expect(RefreshingCredentialProvider.onLocalClock(longTerm, receivedAt: received).credentials.expiration == nil)
    }

    /// One warning when the source's clock is found a minute or more off, or
    /// found off by another amount; none while it stays where it was; one
    /// info line when it comes back within a minute.
    @Test func theClocksDifferenceIsSaidOnceForEachChange() async throws {
        let recorded = RecordedLog()
        // A quarter second before the whole one: the `Date` (whole seconds, cut) read at its middle is 0.25 s late.
        let local = Mutex<Date>(Date(timeIntervalSince1970: 1_800_000_000.75))
        let offsets: [TimeInterval] = [7200, 7230, 0, 20, -3600, -3600, 0]
        let fetched = Mutex<Int>(0)
        let provider = RefreshingCredentialProvider(source: "seq", logger: recorded.logger(label: "test.credentials"),
                                                    localTime: { local.withLock { $0 } }) { () async throws(FerryError) -> AWSCredentials in
            let n = fetched.withLock { count in defer { count += 1 }; return count }
            let sourceNow = local.withLock { $0 }.addingTimeInterval(offsets[n])
            return AWSCredentials(accessKeyId: "ASIA\(n)", secretAccessKey: "s", sessionToken: "t",
                                  expiration: sourceNow.addingTimeInterval(600),
                                  sourceTime: Date(timeIntervalSince1970: sourceNow.timeIntervalSince1970.rounded(.down)))
        }
        var said: [[String]] = []
        for n in offsets.indices {
            #expect(try await provider.credentials().accessKeyId == "ASIA\(n)")
            said.append(recorded.take())
            local.withLock { $0 = $0.addingTimeInterval(700) }
        }
        let warnings = said.map { $0.filter { $0.hasPrefix("warning") }.count }
        let agreements = said.map { $0.filter { $0.contains("now agrees") }.count }
        #expect(warnings == [1, 0, 0, 0, 1, 0, 0], "\(said)")
        #expect(agreements == [0, 0, 1, 0, 0, 0, 1], "\(said)")
        #expect(said[0].contains { $0.contains("come from a clock 7200 s ahead of this machine's") }, "\(said[0])")
        #expect(said[4].contains { $0.contains("come from a clock 3600 s behind this machine's") }, "\(said[4])")
        #expect(said[1].contains { $0.hasPrefix("info") && $0.contains("the source's is 7230 s ahead") }, "\(said[1])")
        #expect(said[3].count == 1 && said[3].allSatisfy { $0.hasPrefix("info") && !$0.contains("the source's is") },
                "within a minute, the info line names no difference: \(said[3])")
    }

    /// The invariant, over sources' clocks up to ten days off (a third within
    /// two minutes), lifetimes of 2 minutes to 12 hours, and callers busy or
    /// idle up to a whole lifetime, seeded: keys handed out are never past their
    /// end by their source's clock, and new keys are fetched only once the
    /// current ones are within the refresh window by that clock
    /// (min(5 minutes, half the lifetime) before their end), never sooner.
    @Test(arguments: [11, 12, 13] as [UInt64])
    func keysAreValidAtTheirSourceAndRenewedOnlyNearTheirEnd(seed: UInt64) async throws {
        struct Issued { var id: String; var endAtSource: Date; var previousLeft: TimeInterval? }
        var random = SeededGenerator(seed: seed)
        for round in 0..<40 {
            // A third of the rounds on clocks within two minutes, as NTP-kept machines with a slow one among them.
            let offset = round % 3 == 0 ? Double.random(in: -120...120, using: &random) : Double.random(in: -864_000...864_000, using: &random)
            let lifetime = round % 2 == 0 ? Double.random(in: 120...3600, using: &random) : Double.random(in: 120...43_200, using: &random)
            let local = Mutex<Date>(Date(timeIntervalSince1970: 1_800_000_000 + Double(round) * 1e7))
            let issued = Mutex<[Issued]>([])
            let provider = RefreshingCredentialProvider(source: "seeded", localTime: { local.withLock { $0 } }) { () async throws(FerryError) -> AWSCredentials in
                let sourceNow = local.withLock { $0 }.addingTimeInterval(offset)
                let id = issued.withLock { list in
                    list.append(Issued(id: "ASIA\(list.count)", endAtSource: sourceNow.addingTimeInterval(lifetime),
                                       previousLeft: list.last.map { $0.endAtSource.timeIntervalSince(sourceNow) }))
                    return "ASIA\(list.count - 1)"
                }
                // A `Date` header: whole seconds, cut.
                return AWSCredentials(accessKeyId: id, secretAccessKey: "s", sessionToken: "t",
                                      expiration: sourceNow.addingTimeInterval(lifetime),
                                      sourceTime: Date(timeIntervalSince1970: sourceNow.timeIntervalSince1970.rounded(.down)))
            }
            let context = "seed \(seed) round \(round): source \(Int(offset)) s off, keys for \(Int(lifetime)) s"
            for step in 0..<60 {
                // Mostly busy (requests within a quarter of the keys' lifetime), sometimes idle up to a whole lifetime.
                let idle = Int.random(in: 0..<4, using: &random) == 0
                let elapsed = step == 0 ? 0 : Double.random(in: 0...(idle ? lifetime : lifetime / 4), using: &random)
                local.withLock { $0 = $0.addingTimeInterval(elapsed) }
                let keys = try await provider.credentials()
                let sourceNow = local.withLock { $0 }.addingTimeInterval(offset)
                let handedOut = try #require(issued.withLock { list in list.first { $0.id == keys.accessKeyId } })
                #expect(handedOut.endAtSource > sourceNow,
                        "\(context), step \(step): \(keys.accessKeyId) handed out \(sourceNow.timeIntervalSince(handedOut.endAtSource)) s after its end")
                // A renewal begun in the background ends before time moves on.
                for _ in 0..<5000 where provider.isRenewing { try await Task.sleep(for: .milliseconds(1)) }
                #expect(!provider.isRenewing, "\(context), step \(step): a renewal did not end")
            }
            let window = min(300, lifetime / 2)
            for renewal in issued.withLock({ $0 }).dropFirst() {
                let left = try #require(renewal.previousLeft)
                #expect(left <= window + 2, "\(context): \(renewal.id) fetched while the keys before had \(Int(left)) s left")
            }
            #expect(issued.withLock { $0.count } > 1, "\(context): the keys were never renewed")
        }
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
        try await CephGateway.start(sts: true, movableClock: true).stopAfter { rgw in
            let roleArn = try #require(rgw.roleArn)
            let shift = Mutex<TimeInterval>(-1200)
            let local: @Sendable () -> Date = { Date().addingTimeInterval(shift.withLock { $0 }) }
            let endpoint = try S3Endpoint(url: rgw.endpoint)
            let transport = CurlTransport()
            let user = AWSCredentials(accessKeyId: rgw.accessKeyId, secretAccessKey: rgw.secretAccessKey)
            try await S3Client.withOwnTransport(.init(endpoint: endpoint, region: "us-east-1", credentials: user)).createBucket("roles")

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
            do throws(FerryError) {
                _ = try await stale.putObject(PutObjectInput(bucket: "roles", key: "stale"), body: .bytes(bytes))
                Issue.record("the gateway took keys past their expiry")
            } catch {
                #expect(error.code == .accessDenied, "\(error)")
            }
        }
    }
}
