import FerryCore
import Foundation

/// Writes `line` and a newline to stderr as `ErrorLine.shown` makes it.
func printError(_ line: String) {
    FileHandle.standardError.write(Data((ErrorLine.shown(line) + "\n").utf8))
}

/// An error line as the commands print it. It repeats what users, stores and
/// file systems named (keys, ids, paths, error texts, refused settings), which
/// may hold escape sequences that would drive the reader's terminal — shown as
/// `\u{…}` — and may be of any length: a configuration file's refused value of
/// 400,000 characters is clipped, not echoed.
enum ErrorLine {
    static let maxBytes = 4096

    static func shown(_ line: String) -> String {
        TerminalText.visible(TextClip.clipped(line, toUTF8: maxBytes))
    }
}
