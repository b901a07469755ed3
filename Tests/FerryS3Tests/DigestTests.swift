import FerryCore
import FerryS3
import FerryStorage
import Foundation
import Testing

/// libcrypto's algorithms are fetched once per process and shared: the known
/// answers (RFC 4231 for HMAC-SHA256, RFC 1321 and FIPS 180-2 for MD5 and SHA-256)
/// hold, also when many threads hash at once.
@Suite struct DigestTests {
    func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    @Test func knownAnswers() {
        #expect(Digest.md5(Array("abc".utf8)).hexString == "900150983cd24fb0d6963f7d28e17f72")
        #expect(Digest.md5([UInt8]()).hexString == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(Digest.sha256(Array("abc".utf8)).hexString == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        // RFC 4231 cases 1, 2 and 6 (a key longer than the block is hashed first).
        #expect(Digest.hmacSHA256(key: [UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8)).hexString
                == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        #expect(Digest.hmacSHA256(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8)).hexString
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(Digest.hmacSHA256(key: [UInt8](repeating: 0xaa, count: 131),
                                  Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)).hexString
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
        let hasher = Digest.Hasher.sha256()
        hasher.update(Array("a".utf8)); hasher.update(Array("bc".utf8))
        #expect(hasher.finish() == hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
    }

    /// The shared algorithms and the prepared HMAC context are only read:
    /// eight threads at once get the same answers as one.
    @Test func manyThreadsAtOnce() async {
        let expected = Digest.hmacSHA256(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8))
        let results = await withTaskGroup(of: Bool.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    (0..<500).allSatisfy { n in
                        Digest.hmacSHA256(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8)) == expected
                            && Digest.md5(Array("abc".utf8)).hexString == "900150983cd24fb0d6963f7d28e17f72"
                            && Digest.sha256(Array("\(worker)-\(n)".utf8)).count == 32
                    }
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results == Array(repeating: true, count: 8))
    }
}
