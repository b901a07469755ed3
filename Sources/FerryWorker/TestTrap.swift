import Foundation

/// For the test suite only: a trap that a test can switch on to prove that a
/// message crashing the worker ends as one `PoisonMessage` dead letter. When
/// the environment variable `FERRY_TEST_TRAP_MARKER` is set, a request whose
/// bytes contain its value stops the process with `fatalError`. Unset (as in
/// production) it does nothing.
enum TestTrap {
    private static let marker: [UInt8]? = ProcessInfo.processInfo.environment["FERRY_TEST_TRAP_MARKER"]
        .flatMap { $0.isEmpty ? nil : Array($0.utf8) }

    static func check(_ bytes: [UInt8]) {
        guard let marker, contains(bytes, marker) else { return }
        fatalError("FERRY_TEST_TRAP_MARKER matched: trapping on purpose (test suite)")
    }

    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }
}
