import FerryCore
import FerryEngine
import Testing

@Suite struct RetryPolicyTests {
    @Test(arguments: [
        (FerryError(.connectionError, "reset"), true), (FerryError(.slowDown, "503 SlowDown"), true),
        (FerryError(.badDigest, "md5"), true), (FerryError(.storageError, "failed with HTTP 503 x"), true),
        (FerryError(.storageError, "failed with HTTP 500 InternalError"), true),
        (FerryError(.storageError, "RequestTimeout"), true), (FerryError(.accessDenied, "403"), false),
        (FerryError(.storageError, "PutObject failed with HTTP 409 ConditionalRequestConflict"), true),
        (FerryError(.preconditionFailed, "PutObject failed with HTTP 412 PreconditionFailed"), false),
        (FerryError(.invalidRequest, "bad"), false), (FerryError(.noSuchKey, "404"), false),
        (FerryError(.storageError, "failed with HTTP 400 InvalidArgument"), false), (FerryError(.cancelled, "x"), false),
    ])
    func whatIsRetried(error: FerryError, retried: Bool) {
        #expect(RetryPolicy.isRetryable(error) == retried, "\(error)")
    }

    /// Full jitter within a doubling ceiling; after SlowDown the ceiling is four times higher.
    @Test func backoffCeilings() {
        let policy = RetryPolicy(retryLimit: 5, baseDelaySeconds: 0.1, maxDelaySeconds: 100)
        let slow = FerryError(.slowDown, "503")
        var plainMax = 0.0, slowMax = 0.0
        for _ in 0..<2000 {
            plainMax = max(plainMax, policy.delay(beforeRetry: 2))
            slowMax = max(slowMax, policy.delay(beforeRetry: 2, after: slow))
        }
        #expect(plainMax <= 0.4)
        #expect(slowMax <= 1.6)
        #expect(slowMax > 0.4)   // 2000 uniform draws in [0, 1.6]: some exceed the plain ceiling
        #expect(RetryPolicy(retryLimit: 3, baseDelaySeconds: 1, maxDelaySeconds: 2).delay(beforeRetry: 10) <= 2)
    }

    @Test func retryLimitZeroMeansOneAttempt() async {
        var calls = 0
        do {
            _ = try await RetryPolicy(retryLimit: 0).run { () async throws(FerryError) -> Int in
                calls += 1
                throw FerryError(.connectionError, "down")
            }
        } catch {
            #expect(error.code == .connectionError)
        }
        #expect(calls == 1)
    }
}
