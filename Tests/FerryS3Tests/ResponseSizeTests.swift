@testable import FerryLocalStore
@testable import FerryS3
@testable import FerryStorage
import FerryTestSupport
import Testing

/// An object's size comes from the server's headers: whatever they say, it is
/// never negative (downloads size files, plan ranges and check free space with it).
@Suite struct ResponseSizeTests {
    @Test func sizesFromHeadersAreNeverNegative() {
        #expect(S3Client.getAttributes(["content-length": "100", "content-range": "bytes 0-99/12345"]).size == 12345)
        #expect(S3Client.getAttributes(["content-length": "100", "content-range": "bytes 0-99/-5"]).size == 100)
        #expect(S3Client.getAttributes(["content-length": "-7"]).size == 0)
        var rng = SeededGenerator(seed: 0x517E)
        let pieces = ["-", "0", "9", "/", "*", " ", "bytes ", "99999999999999999999", "+", "e"]
        for _ in 0..<2_000 {
            let range = (0..<Int.random(in: 0...6, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
            let length = (0..<Int.random(in: 0...3, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
            let size = S3Client.getAttributes(["content-length": length, "content-range": range]).size
            #expect(size >= 0, "content-length \(length) content-range \(range)")
        }
    }
}
