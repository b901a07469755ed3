import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// Invariant: bash reads `ShellWord.quoted(w)` back as `w`, whatever `w` holds,
/// and the quoted word is one line with nothing `TerminalText` would not print
/// (it goes into log lines and listings). Checked with bash itself on generated words (seeded; `FERRY_FUZZ_SEED`
/// replays a run).
@Suite struct ShellWordTests {
    /// What keys may hold that a shell or a terminal treats specially, and plain characters.
    static let alphabet: [Unicode.Scalar] = Array("ab/z09-_.:@%+,=".unicodeScalars)
        + Array(" \t\n\r'\"\\$`!*?[]{}()<>|&;#~^".unicodeScalars)
        + ["\u{1}", "\u{1B}", "\u{7F}", "\u{85}", "\u{9B}", "\u{202E}", "\u{2067}", "é", "ß", "\u{2028}", "😀", "\u{FEFF}"]

    @Test func bashReadsEveryQuotedWordBack() throws {
        let seed = FuzzReplay.seed
        var random = SeededGenerator(seed: seed)
        var words = ["", "'", "''", "\\", "$'x'", "-n", "a b", "plain/key.txt", "--abort", "\n", "key\u{1B}[2J"]
        for _ in 0..<400 {
            let length = Int.random(in: 1...24, using: &random)
            var word = String.UnicodeScalarView()
            for _ in 0..<length { word.append(Self.alphabet.randomElement(using: &random)!) }
            words.append(String(word))
        }
        let quoted = words.map(ShellWord.quoted)
        for q in quoted {
            #expect(!q.unicodeScalars.contains(where: TerminalText.isUnsafe),
                    "seed \(seed): \(q.debugDescription) holds a character TerminalText would not print")
        }
        // One bash reads them all: each printed with a NUL after it.
        let script = "printf '%s\\0' " + quoted.joined(separator: " ")
        let bash = Process()
        bash.executableURL = URL(fileURLWithPath: "/bin/bash")
        bash.arguments = ["-c", script]
        let out = Pipe()
        bash.standardOutput = out
        try bash.run()
        let printed = out.fileHandleForReading.readDataToEndOfFile()
        bash.waitUntilExit()
        #expect(bash.terminationStatus == 0, "seed \(seed)")
        let read = printed.split(separator: 0, omittingEmptySubsequences: false).dropLast().map { String(decoding: $0, as: UTF8.self) }
        try #require(read.count == words.count, "seed \(seed): bash read \(read.count) words of \(words.count)")
        for (index, word) in words.enumerated() where read[index] != word {
            Issue.record("seed \(seed): \(word.debugDescription) quoted as \(quoted[index]) reads back as \(read[index].debugDescription)")
        }
    }

    @Test func plainWordsStayBare() {
        #expect(ShellWord.quoted("photos/2026/cat.jpg") == "photos/2026/cat.jpg")
        #expect(ShellWord.quoted("s3://bkt/a b") == "'s3://bkt/a b'")
        #expect(ShellWord.quoted("it's") == "'it'\\''s'")
        #expect(ShellWord.quoted("a\nb") == "$'a\\x0ab'")
        #expect(ShellWord.quoted("") == "''")
    }
}
