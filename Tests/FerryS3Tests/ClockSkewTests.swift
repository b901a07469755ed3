import FerryCore
@testable import FerryLocalStore
@testable import FerryS3
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// A machine whose clock is off by more than S3's 15 minutes: every request
/// would be refused (`RequestTimeTooSkewed`). The client learns the store's
/// time from the refusal and signs again. Checked against Ceph's gateway,
/// which refuses such signatures as S3 does.
@Suite(.serialized) struct ClockSkewTests {
    @Test func aRefusalMovesTheClockOnlyWhenTheSigningTimeWasFarOff() {
        let local = Date(timeIntervalSince1970: 1_800_000_000)
        let clock = SigningClock(endpoint: "http://store", localTime: { local })
        #expect(clock.now() == local)
        // The store's time is 30 s from the signing time: the time was not what it refused.
        #expect(!clock.correct(signedAt: local, serverDate: local.addingTimeInterval(30)))
        #expect(clock.offset == 0)
        // An hour behind the store's.
        #expect(clock.correct(signedAt: local, serverDate: local.addingTimeInterval(3600)))
        #expect(abs(clock.offset - 3600.5) < 0.01)
        #expect(abs(clock.now().timeIntervalSince(local) - 3600.5) < 0.01)
        // A request signed before the correction, refused after it: sign again, nothing new to learn.
        #expect(clock.correct(signedAt: local, serverDate: local.addingTimeInterval(3600)))
        // The machine's clock put right meanwhile (the store's time is now the local time): learned anew, not added.
        #expect(clock.correct(signedAt: clock.now(), serverDate: local))
        #expect(abs(clock.offset - 0.5) < 0.01)
    }

    /// A bare 403 (a HEAD's) moves the clock only past S3's 15-minute window:
    /// a HEAD refused for its credentials on a clock a few minutes off is not
    /// signed again, nor reported as a clock the store refused.
    @Test func aBareRefusalMovesTheClockOnlyPastS3sWindow() {
        let local = Date(timeIntervalSince1970: 1_800_000_000)
        let clock = SigningClock(endpoint: "http://store", localTime: { local })
        #expect(!clock.correct(signedAt: local, serverDate: local.addingTimeInterval(5 * 60), named: false))
        #expect(!clock.correct(signedAt: local, serverDate: local.addingTimeInterval(-13 * 60), named: false))
        #expect(clock.offset == 0)
        #expect(clock.correct(signedAt: local, serverDate: local.addingTimeInterval(16 * 60), named: false))
        #expect(abs(clock.offset - 960.5) < 0.01)
    }

    /// Every kind of request a transfer makes, from clients whose clocks are
    /// hours behind, 20 minutes ahead, and a day ahead; each client's first
    /// request is a HEAD, whose refusal has no body to name the cause.
    @Test(.enabled(if: CephGateway.isInstalled || ProcessInfo.processInfo.environment["CI"] != nil))
    func requestsFromASkewedClockSucceedOnCeph() async throws {
        try await CephGateway.start().stopAfter { rgw in
            let dir = try TestPaths.temporaryDirectory("skew")
            defer { try? FileManager.default.removeItem(at: dir) }
            let endpoint = try S3Endpoint(url: rgw.endpoint)
            let credentials = AWSCredentials(accessKeyId: rgw.accessKeyId, secretAccessKey: rgw.secretAccessKey)
            try await S3Client.withOwnTransport(.init(endpoint: endpoint, region: "us-east-1", credentials: credentials)).createBucket("skew")
            for skew: TimeInterval in [-3 * 3600, 20 * 60, 86_400] {
                let clock = SigningClock(endpoint: rgw.endpoint, localTime: { Date().addingTimeInterval(skew) })
                let s3 = S3Client.withOwnTransport(.init(endpoint: endpoint, region: "us-east-1", credentials: credentials), clock: clock)
                let key = "skew/\(Int(skew))"
                #expect(try await s3.headObject(bucket: "skew", key: key) == nil, "skew \(skew)")
                #expect(abs(clock.offset + skew) < 5, "skew \(skew): learned \(clock.offset)")

                let bytes = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ Int(skew)) }
                let put = try await s3.putObject(PutObjectInput(bucket: "skew", key: key), body: .bytes(bytes))
                #expect(put.eTag == "\"\(Digest.md5(bytes).hexString)\"")
                let out = dir.appendingPathComponent("\(Int(skew)).bin")
                let fd = open(out.path, O_RDWR | O_CREAT | O_TRUNC, 0o644)
                defer { close(fd) }
                _ = try await s3.getObject(bucket: "skew", key: key, into: fd)
                #expect(try Data(contentsOf: out) == Data(bytes))
                #expect(try await s3.listObjects(bucket: "skew", prefix: key, continuation: nil, maxKeys: 10).items.map(\.key) == [key])

                // Multipart, from a fresh skewed client: CreateMultipartUpload is the refused one.
                let fresh = S3Client.withOwnTransport(.init(endpoint: endpoint, region: "us-east-1", credentials: credentials),
                                     clock: SigningClock(endpoint: rgw.endpoint, localTime: { Date().addingTimeInterval(skew) }))
                let location = ObjectLocation(bucket: "skew", key: key + ".parts")
                let uploadId = try await fresh.createMultipartUpload(PutObjectInput(bucket: "skew", key: location.key))
                let part = try await fresh.uploadPart(location, uploadId: uploadId, partNumber: 1, body: .bytes(bytes),
                                                      checksum: nil, headers: [:], progress: nil)
                _ = try await fresh.completeMultipartUpload(location, uploadId: uploadId, parts: [part])
                #expect(try await fresh.headObject(bucket: "skew", key: location.key)?.size == Int64(bytes.count))

                // A presigned URL from a client that learned the store's time works for curl.
                let url = try await s3.presignedURL(method: "GET", location: ObjectLocation(bucket: "skew", key: key), expires: 300)
                let fetched = dir.appendingPathComponent("curl-\(Int(skew)).bin")
                try await runChecked("curl", ["-fsS", "-o", fetched.path, url])
                #expect(try Data(contentsOf: fetched) == Data(bytes))
                _ = try await s3.deleteObject(bucket: "skew", key: key)
            }

            // Another refusal is not taken for the clock's: a wrong secret still fails, as access denied.
            let forged = S3Client.withOwnTransport(.init(endpoint: endpoint, region: "us-east-1",
                                        credentials: AWSCredentials(accessKeyId: rgw.accessKeyId, secretAccessKey: "not-the-secret-00000000000000000000000")),
                                  clock: SigningClock(endpoint: rgw.endpoint, localTime: { Date().addingTimeInterval(3600) }))
            do throws(FerryError) {
                _ = try await forged.headObject(bucket: "skew", key: "skew/none")
                Issue.record("a HEAD signed with the wrong secret was answered")
            } catch {
                #expect(error.code == .accessDenied, "\(error)")
            }
        }
    }

    /// `ferry cp` up and down, and `ferry uploads`, on a machine whose clock is off (libfaketime
    /// moves the whole process's clock), with the line that tells the operator.
    // Not under a sanitizer: its runtime's timed waits do not go through libfaketime's, and the process hangs.
    @Test(.enabled(if: CephGateway.isInstalled || ProcessInfo.processInfo.environment["CI"] != nil),
          .enabled(if: ProcessInfo.processInfo.environment["FERRY_TEST_SANITIZER"] == nil, "libfaketime and TSan's interceptors"))
    func theCommandLineOnAMachineWhoseClockIsOff() async throws {
        try await CephGateway.start().stopAfter { rgw in
            let dir = try TestPaths.temporaryDirectory("skew-cp")
            defer { try? FileManager.default.removeItem(at: dir) }
            try await Boto3(rgw)("create-bucket", "skewcp")
            let source = dir.appendingPathComponent("in.bin")
            // Larger than a part: the upload is multipart, its parts sent at once.
            let bytes = Data((0..<(20 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ ($0 >> 11)) })
            try bytes.write(to: source)
            var env = rgw.clientEnvironment
            env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
            for (offset, words) in [("-1h", "3600 s behind"), ("+2h", "7200 s ahead of")] {
                let up = try await runCommand("/usr/bin/faketime", ["-f", offset, TestPaths.ferryBinary, "cp", source.path,
                                                                    "s3://skewcp/in\(offset).bin", "--part-size", "5MiB"],
                                              environment: env)
                #expect(up.status == 0, "\(offset): \(up.stderr)")
                #expect(up.stderr.contains("RequestTimeTooSkewed") && up.stderr.contains("this machine's clock is \(words) the store's"),
                        "\(offset): \(up.stderr)")
                let back = dir.appendingPathComponent("back\(offset).bin")
                let down = try await runCommand("/usr/bin/faketime", ["-f", offset, TestPaths.ferryBinary, "cp",
                                                                      "s3://skewcp/in\(offset).bin", back.path], environment: env)
                #expect(down.status == 0, "\(offset): \(down.stderr)")
                #expect(try Data(contentsOf: back) == bytes)
            }

            // An upload begun just now is no hour old to `ferry uploads` on a machine two hours ahead:
            // its age is reckoned by the store's clock, which stamped it.
            let started = try await Boto3(rgw)("create-multipart-upload", "skewcp", "young.bin")
            let uploadId = try #require(started.split(separator: "\n").first.map(String.init))
            let sweep = try await runCommand("/usr/bin/faketime", ["-f", "+2h", TestPaths.ferryBinary, "uploads", "s3://skewcp/young",
                                                                   "--abort", "--older-than", "3600"], environment: env)
            #expect(sweep.status == 0, "\(sweep.stderr)")
            #expect(sweep.stderr.contains("aborted 0 of 1 incomplete uploads"), "\(sweep.stderr)")
            let listed = try await runChecked(TestPaths.ferryBinary, ["uploads", "s3://skewcp/young"], environment: rgw.clientEnvironment)
            #expect(listed.contains(uploadId), "\(listed)")
        }
    }
}
