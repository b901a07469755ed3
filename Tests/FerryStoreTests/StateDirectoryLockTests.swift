import FerryCore
import FerryStore
import FerryTestSupport
import Foundation
import Testing

/// One holder per state directory; the refusal names the holder; a release
/// (or the holder's end) lets the next in.
@Suite struct StateDirectoryLockTests {
    @Test func oneHolderAtATimeAndTheRefusalNamesIt() throws {
        let base = try TestPaths.temporaryDirectory("state-lock-unit")
        defer { try? FileManager.default.removeItem(at: base) }
        let directory = base.appendingPathComponent("state/deeper")
        let first = try StateDirectoryLock(directory: directory, holder: "worker w1")
        do {
            _ = try StateDirectoryLock(directory: directory, holder: "worker w2")
            Issue.record("a second lock was granted")
        } catch {
            #expect(error.message.contains("is in use by another worker (worker w1, pid \(getpid()))"), "\(error.message)")
        }
        // A holder's text is shown printable, whatever was written there.
        first.release()
        let second = try StateDirectoryLock(directory: directory, holder: "worker \u{1b}[2Jw2")
        #expect(throws: FerryError.self) { try StateDirectoryLock(directory: directory, holder: "w3") }
        do { _ = try StateDirectoryLock(directory: directory, holder: "w3") } catch {
            #expect(!error.message.contains("\u{1b}") && error.message.contains("\\u{1B}[2Jw2"), "\(error.message)")
        }
        second.release()
        second.release()  // twice is harmless
        _ = try StateDirectoryLock(directory: directory, holder: "w4")
    }
}
