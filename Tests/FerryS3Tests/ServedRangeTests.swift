import FerryCore
@testable import FerryLocalStore
@testable import FerryS3
@testable import FerryStorage
import FerryTestSupport
import Foundation
import Testing

/// Invariant: a ranged GET succeeds only with the bytes it asked for. A
/// download writes each range's body at the range's offset, and a large
/// object without a full-object checksum is not checked as a whole after it:
/// a proxy or store that answers another range must fail the request.
@Suite struct ServedRangeTests {
    /// One answer to a request for `asked` of an object of `size` bytes.
    struct Answer: CustomStringConvertible {
        var status: Int
        var contentRange: String?
        var bodyLength: Int64
        /// What the oracle knows: the bytes the body holds (nil: unreadable).
        var holds: ClosedRange<Int64>?
        var description: String { "\(status) \(contentRange ?? "-") body \(bodyLength)" }
    }

    /// Answers honest and not: the right range, shifted, longer, shorter,
    /// the whole object, a '*' total, a body that disagrees, text that is not a range.
    static func answer(asked: ClosedRange<Int64>, size: Int64, using rng: inout SeededGenerator) -> Answer {
        let last = min(asked.upperBound, size - 1)
        let honest = asked.lowerBound...last
        switch Int.random(in: 0..<8, using: &rng) {
        case 0:
            return Answer(status: 206, contentRange: "bytes \(honest.lowerBound)-\(honest.upperBound)/\(size)",
                          bodyLength: Int64(honest.count), holds: honest)
        case 1:
            let shift = Int64.random(in: -3...3, using: &rng)
            let first = max(0, honest.lowerBound + shift), end = max(first, min(size - 1, honest.upperBound + shift))
            return Answer(status: 206, contentRange: "bytes \(first)-\(end)/\(size)", bodyLength: end - first + 1, holds: first...end)
        case 2:
            let end = max(honest.lowerBound, min(size - 1, honest.upperBound + Int64.random(in: -2...2, using: &rng)))
            return Answer(status: 206, contentRange: "bytes \(honest.lowerBound)-\(end)/\(size)",
                          bodyLength: end - honest.lowerBound + 1, holds: honest.lowerBound...end)
        case 3:
            return Answer(status: 200, contentRange: nil, bodyLength: size, holds: 0...(size - 1))
        case 4:
            return Answer(status: 206, contentRange: "bytes \(honest.lowerBound)-\(honest.upperBound)/*",
                          bodyLength: Int64(honest.count), holds: honest.lowerBound...honest.upperBound)
        case 5:
            return Answer(status: 206, contentRange: "bytes \(honest.lowerBound)-\(honest.upperBound)/\(size)",
                          bodyLength: Int64(honest.count) - Int64.random(in: 1...3, using: &rng), holds: nil)
        case 6:
            return Answer(status: 206, contentRange: nil, bodyLength: Int64(honest.count), holds: nil)
        default:
            let junk = ["bytes=\(honest.lowerBound)-\(honest.upperBound)/\(size)", "bytes \(honest.upperBound + 1)-\(honest.lowerBound)/\(size)",
                        "bytes -\(honest.upperBound)/\(size)", "bytes \(honest.lowerBound)-\(honest.upperBound)", "items 0-1/2",
                        "bytes +\(honest.lowerBound)-\(honest.upperBound)/\(size)", "bytes \(honest.lowerBound)-\(honest.upperBound)/\(honest.upperBound)"]
            return Answer(status: 206, contentRange: junk.randomElement(using: &rng), bodyLength: Int64(honest.count), holds: nil)
        }
    }

    @Test func onlyTheBytesAskedForAreTaken() {
        let seed = FuzzReplay.seed
        var rng = SeededGenerator(seed: seed)
        var taken = 0, refused = 0
        for _ in 0..<FuzzReplay.messages(default: 20_000) {
            let size = Int64.random(in: 1...200, using: &rng)
            let first = Int64.random(in: 0..<size, using: &rng)
            let asked = first...(first + Int64.random(in: 0...250, using: &rng))
            let answer = Self.answer(asked: asked, size: size, using: &rng)
            // What the caller may use: the object's bytes from the range's first to its last
            // (or the object's last), as many as the body has. An answer that does not know the
            // object's size ('*') must hold the whole range: a shorter one says nothing of where
            // the object ends.
            let unknownSize = answer.contentRange?.hasSuffix("/*") == true
            let exact = answer.holds.map { $0.lowerBound == asked.lowerBound && $0.upperBound == min(asked.upperBound, size - 1)
                && Int64($0.count) == answer.bodyLength && (!unknownSize || $0.upperBound == asked.upperBound) } ?? false
            // A 200 sends the whole object: usable from byte 0 only (longer than the range, the size cap stops it).
            let whole = answer.status == 200 && asked.lowerBound == 0
            let problem = ServedRange.problem(asked: asked, status: answer.status, contentRange: answer.contentRange,
                                              bodyLength: answer.bodyLength)
            #expect((problem == nil) == (exact || whole), "asked \(asked) of \(size): \(answer) → \(problem ?? "taken") (FERRY_FUZZ_SEED=\(seed))")
            if problem == nil { taken += 1 } else { refused += 1 }
        }
        #expect(taken > 1_000 && refused > 1_000)
        // Values at Int64's ends never trap (a '*' total lets `last` be Int64.max).
        #expect(ServedRange.problem(asked: 0...Int64.max, status: 206, contentRange: "bytes 0-\(Int64.max)/*", bodyLength: 10) != nil)
        #expect(ServedRange.problem(asked: 0...Int64.max, status: 206, contentRange: "bytes 0-99999999999999999999/*", bodyLength: 10) != nil)
    }

    @Test func aShiftedRangeFailsTheRequestAndAnHonestOneSucceeds() async throws {
        // The answerer names bytes one past those asked for (a cache keyed by the wrong range, say).
        let server = try HTTPAnswerer { head in
            let honest = head.contains("range: bytes=0-") || head.contains("\r\nx-honest: 1")
            return honest ? ("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 10-19/100\r\nETag: \"e\"", .fixed(Array(repeating: 1, count: 10)))
                : ("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 11-20/100\r\nETag: \"e\"", .fixed(Array(repeating: 2, count: 10)))
        }
        let s3 = S3Client.withOwnTransport(.init(endpoint: try S3Endpoint(url: "http://127.0.0.1:\(server.port)"), region: "us-east-1",
                                credentials: AWSCredentials(accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret")))
        let file = try TestPaths.temporaryDirectory("served-range").appendingPathComponent("out")
        #expect(FileManager.default.createFile(atPath: file.path, contents: nil))
        let fd = open(file.path, O_RDWR)
        defer { close(fd) }
        do {
            _ = try await s3.getObject(GetObjectInput(bucket: "bkt", key: "k", range: 10...19), into: fd, at: 10, progress: nil)
            Issue.record("a shifted range was taken")
        } catch {
            #expect(error.code == .storageError)
            #expect(error.message.contains("other bytes than asked for: bytes 11-20"), "\(error)")
        }
        let got = try await s3.getObject(GetObjectInput(bucket: "bkt", key: "k", range: 10...19, headers: ["x-honest": "1"]),
                                         into: fd, at: 10, progress: nil)
        #expect(got.bytesReceived == 10 && got.size == 100)
    }
}
