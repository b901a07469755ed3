import FerryCore
import FerryEngine
import FerryTestSupport
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

    /// Invariant: the body runs again only after `stopsRetrying` said no, and
    /// at most `retryLimit` times; a stop ends the run with the failure it was
    /// asked about. Generated: limits, failure sequences and the asks' answers.
    @Test func aStopEndsTheRetriesWithTheFailureAskedAbout() async {
        let seed = FuzzReplay.seed
        print("RetryPolicyTests seed \(seed) (FERRY_FUZZ_SEED=\(seed) replays it)")
        var random = SeededGenerator(seed: seed)
        let failures = [FerryError(.connectionError, "reset"), FerryError(.slowDown, "503"), FerryError(.accessDenied, "403"),
                        FerryError(.credentialsUnavailable, "no keys"), FerryError(.storageError, "failed with HTTP 500 InternalError")]
        for round in 0..<300 {
            let limit = Int.random(in: 0...4, using: &random)
            let outcomes: [FerryError?] = (0...limit).map { _ in Bool.random(using: &random) ? nil : failures.randomElement(using: &random) }
            let answers = (0...limit).map { _ in Int.random(in: 0..<4, using: &random) == 0 }
            // The model: attempt i fails with outcomes[i] (nil: succeeds); a retryable failure within
            // the limit is followed by ask number i, whose answer `answers[i]` may stop the run.
            var expectedCalls = 0, expectedAsks = 0
            var expected: Result<Int, FerryError> = .success(-1)
            for (i, outcome) in outcomes.enumerated() {
                expectedCalls += 1
                guard let outcome else { expected = .success(i); break }
                expected = .failure(outcome)
                guard i < limit, RetryPolicy.isRetryable(outcome) else { break }
                expectedAsks += 1
                if answers[i] { break }
            }
            var calls = 0, asks = 0
            let policy = RetryPolicy(retryLimit: limit, baseDelaySeconds: 0, maxDelaySeconds: 0)
            let result: Result<Int, FerryError>
            do throws(FerryError) {
                result = .success(try await policy.run(stopsRetrying: { error in
                    defer { asks += 1 }
                    #expect("\(error)" == "\(outcomes[asks]!)", "round \(round): ask \(asks) about \(error)")
                    return answers[asks]
                }) { () async throws(FerryError) -> Int in
                    defer { calls += 1 }
                    if let failure = outcomes[calls] { throw failure }
                    return calls
                })
            } catch {
                result = .failure(error)
            }
            #expect(calls == expectedCalls && asks == expectedAsks,
                    "round \(round): limit \(limit), outcomes \(outcomes), answers \(answers): \(calls) calls, \(asks) asks")
            #expect("\(result)" == "\(expected)", "round \(round)")
        }
    }
}
