import FerryCore
import FerryEngine
import FerryS3
import FerryStorage
import FerryTestSupport
import Foundation
import Logging
import Synchronization
import Testing

/// Invariant: no request is retried into a store its caller has found down.
/// A request that gets no answer is followed by the caller's outage check
/// before any retry; a yes ends the transfer with that failure at once (the
/// worker then waits for the store, `ferry cp` stops). A failure the store
/// answered never asks. And the probe that decides is bounded by its own time
/// limit, not by the 30 s low-speed cut-off of a silent connection.
@Suite struct OutageCheckTests {
    /// Serves with `body` every request and counts them by method.
    final class Store: Sendable {
        final class Methods: Sendable { let seen = Mutex<[String]>([]) }
        let server: HTTPAnswerer
        let methods = Methods()
        init(_ body: HTTPAnswerer.Body, head: String = "") throws {
            let methods = self.methods
            server = try HTTPAnswerer { request in
                methods.seen.withLock { $0.append(String(request.prefix { $0 != " " })) }
                return (head, body)
            }
        }
        var endpoint: String { "http://127.0.0.1:\(server.port)" }
        var requests: [String] { methods.seen.withLock { $0 } }
        var puts: Int { requests.filter { $0 == "PUT" }.count }
    }

    func upload(to store: Store, outageCheck: (any OutageCheck)?) async throws -> FerryError? {
        let root = try TestPaths.temporaryDirectory("outage-check")
        defer { try? FileManager.default.removeItem(at: root) }
        let file = root.appendingPathComponent("small.txt")
        try Data("hello".utf8).write(to: file)
        let client = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: store.endpoint), region: "us-east-1",
                                    credentials: .init(accessKeyId: "testing", secretAccessKey: "testing")))
        var configuration = TransferEngine.Configuration()
        configuration.defaults.retryPolicy = RetryPolicy(retryLimit: 3, baseDelaySeconds: 0.01, maxDelaySeconds: 0.01)
        let engine = TransferEngine(store: client, dataRoot: try DataRoot(root.path), configuration: configuration,
                                    logger: Logger(label: "test.outage-check"))
        let request = TransferRequest(id: "u1", op: .upload, bucket: "bkt", key: "small.txt", source: file.absoluteString)
        do throws(FerryError) {
            _ = try await engine.run(TransferJob(request: request, objectKey: "small.txt"), outageCheck: outageCheck)
            return nil
        } catch {
            return error
        }
    }

    /// Answers every check with `answer`, and counts them.
    final class Asks: OutageCheck {
        let answer: Bool
        let count = SharedCounter()
        init(answering answer: Bool) { self.answer = answer }
        func confirmsOutage(_ error: FerryError) async -> Bool {
            #expect(error.isNoAnswer, "\(error)")
            count.add()
            return answer
        }
    }

    @Test func aStoreFoundDownGetsNoRetry() async throws {
        let store = try Store(.hangUp)
        let asks = Asks(answering: true)
        let error = try #require(try await upload(to: store, outageCheck: asks))
        #expect(error.isNoAnswer, "\(error)")
        #expect(store.puts == 1 && asks.count.value == 1, "\(store.puts) PUTs, \(asks.count.value) asks")
    }

    @Test func aStoreThatAnswersTheCheckIsRetriedAsBefore() async throws {
        let store = try Store(.hangUp)
        let asks = Asks(answering: false)
        #expect(try await upload(to: store, outageCheck: asks)?.isNoAnswer == true)
        #expect(store.puts == 4 && asks.count.value == 3, "\(store.puts) PUTs, \(asks.count.value) asks")
        let unchecked = try Store(.hangUp)
        #expect(try await upload(to: unchecked, outageCheck: nil)?.isNoAnswer == true)
        #expect(unchecked.puts == 4)
    }

    @Test func aFailureTheStoreAnsweredAsksNothing() async throws {
        let store = try Store(.fixed(Array("<Error><Code>SlowDown</Code><Message>busy</Message></Error>".utf8)),
                              head: "HTTP/1.1 503 Slow Down")
        let asks = Asks(answering: true)
        let error = try #require(try await upload(to: store, outageCheck: asks))
        #expect(error.code == .slowDown, "\(error)")
        #expect(store.puts == 4 && asks.count.value == 0)
    }

    /// An `https://` source that gives no answer is the transfer's own failure,
    /// not the store's: retried as any failure, never asked about. It cost a
    /// probe of the store per retry, and while the store was down too the
    /// transfer waited for the store instead of failing for its source.
    @Test func aSourceThatGivesNoAnswerIsNotAskedAbout() async throws {
        let root = try TestPaths.temporaryDirectory("outage-source")
        defer { try? FileManager.default.removeItem(at: root) }
        let source = try Store(.hangUp)
        let store = try Store(.hangUp)
        let client = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: store.endpoint), region: "us-east-1",
                                    credentials: .init(accessKeyId: "testing", secretAccessKey: "testing")))
        var configuration = TransferEngine.Configuration()
        configuration.defaults.retryPolicy = RetryPolicy(retryLimit: 3, baseDelaySeconds: 0.01, maxDelaySeconds: 0.01)
        var policy = RemoteSourcePolicy()
        policy.schemes = ["http", "https"]
        policy.allowedRanges = [try AddressRange("127.0.0.0/8")]
        configuration.remoteSources = RemoteSourceFetcher(policy: policy, transport: TestHTTP.transport)
        let engine = TransferEngine(store: client, dataRoot: try DataRoot(root.path), configuration: configuration,
                                    logger: Logger(label: "test.outage-check"))
        let request = TransferRequest(id: "s1", op: .upload, bucket: "bkt", key: "s.bin", source: "\(source.endpoint)/file.bin")
        // The check would say the store is down, as it is here: it is never asked.
        let asks = Asks(answering: true)
        var failure: FerryError?
        do throws(FerryError) {
            _ = try await engine.run(TransferJob(request: request, objectKey: "s.bin"), outageCheck: asks)
        } catch {
            failure = error
        }
        let error = try #require(failure)
        #expect(error.code == .connectionError && error.isSourceFailure && !error.isStoreNoAnswer, "\(error)")
        #expect(error.message.contains("127.0.0.1:\(source.server.port)/file.bin"), "the source is named: \(error)")
        #expect(source.requests == ["GET", "GET", "GET", "GET"] && asks.count.value == 0 && store.requests.isEmpty,
                "source \(source.requests), store \(store.requests), \(asks.count.value) asks")
        // Not carried by what is published: a status or DLQ record has the code and the message only.
        let encoded = try JSONEncoder().encode(error)
        let decoded = try JSONDecoder().decode(FerryError.self, from: encoded)
        let keys = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any]).keys.sorted()
        #expect(decoded == FerryError(error.code, error.message) && keys == ["code", "message"], "\(keys)")
    }

    /// A store that takes the connection and never answers: the probe gives
    /// up at its time limit (10 s), where a request waits out the low-speed cut-off (30 s).
    @Test func theProbeOfASilentStoreEndsAtItsTimeLimit() async throws {
        let store = try Store(.silence)
        let client = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: store.endpoint), region: "us-east-1",
                                    credentials: .init(accessKeyId: "testing", secretAccessKey: "testing")))
        let started = ContinuousClock.now
        await #expect { try await client.probe() } throws: { ($0 as? FerryError)?.isNoAnswer == true }
        let took = ContinuousClock.now - started
        print("probe of a silent store ended after \(took)")
        #expect(took >= .seconds(S3Client.probeTimeLimitSeconds - 1) && took < .seconds(25), "\(took)")
        #expect(store.requests == ["GET"])
    }
}
