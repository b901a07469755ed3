import FerryTestSupport
import Foundation
import Testing

/// The commit-msg hook (`scripts/commit-subjects.sh --message`) takes a
/// message exactly when its subject has 1 to 72 characters and a blank line
/// separates it from any body; comment lines are ignored, as git drops them.
@Suite struct CommitConventionTests {
    static let script = TestPaths.repositoryRoot.appendingPathComponent("scripts/commit-subjects.sh").path

    @Test func theHookTakesExactlyTheMessagesTheConventionAllows() async throws {
        var rng = SeededGenerator(seed: 72)
        let directory = try TestPaths.temporaryDirectory("commit-messages")
        defer { try? FileManager.default.removeItem(at: directory) }
        let letters = Array("abcdefghijklmnopqrstuvwxyz ABC,.:-é")
        for n in 0..<60 {
            let length = n < 6 ? [0, 1, 71, 72, 73, 200][n] : Int.random(in: 1...100, using: &rng)
            // A letter first: a subject of spaces is a question for the reviewer, not for this length rule.
            let subject = length == 0 ? "" : "S" + String((1..<length).map { _ in letters.randomElement(using: &rng)! })
            let shape = Int.random(in: 0..<4, using: &rng)
            let message: String
            switch shape {
            case 0: message = subject + "\n"
            case 1: message = subject + "\n\nWhy, with figures.\n"
            case 2: message = subject + "\nno blank line\n"
            default: message = "# a comment git drops\n" + subject + "\n\n# another\nbody\n"
            }
            let file = directory.appendingPathComponent("m\(n)")
            try message.write(to: file, atomically: true, encoding: .utf8)
            let result = try await runCommand("/bin/bash", [Self.script, "--message", file.path], timeout: 30)
            let allowed = !subject.isEmpty && subject.count <= 72 && shape != 2
            // Characters, not bytes: é is one.
            #expect((result.status == 0) == allowed, "length \(subject.count), shape \(shape): exit \(result.status) \(result.stderr)")
        }
    }
}
