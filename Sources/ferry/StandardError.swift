import FerryCore
import Foundation

/// Writes `line` and a newline to stderr with its control characters shown as
/// `\u{…}`: what the commands say there repeats what users, stores and file
/// systems named (keys, ids, paths, error texts), which may hold escape
/// sequences that would drive the reader's terminal.
func printError(_ line: String) {
    FileHandle.standardError.write(Data((TerminalText.visible(line) + "\n").utf8))
}
