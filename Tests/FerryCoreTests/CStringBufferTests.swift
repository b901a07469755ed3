import FerryCore
import Testing

@Suite struct CStringBufferTests {
    @Test func readsUpToTheFirstNul() {
        let buffer: [CChar] = [0x6f, 0x6b, 0, 0x78, 0x79, 0]
        #expect(String(cBuffer: buffer) == "ok")
    }

    @Test func aFullBufferWithoutNulIsReadToItsEndAndNoFurther() {
        let buffer: [CChar] = [0x61, 0x62, 0x63]
        #expect(String(cBuffer: buffer.prefix(2)) == "ab")
        #expect(String(cBuffer: buffer) == "abc")
    }

    @Test func invalidUTF8IsRepairedNotDropped() {
        // 0xC3 starts a two-byte sequence that never ends; 0xE9 is Latin-1 é.
        let buffer: [CChar] = [0x61, CChar(bitPattern: 0xC3), 0x62, CChar(bitPattern: 0xE9), 0]
        #expect(String(cBuffer: buffer) == "a\u{FFFD}b\u{FFFD}")
        #expect(String(cBuffer: [CChar]()) == "")
    }
}
