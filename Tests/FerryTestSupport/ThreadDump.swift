import Foundation

/// The stacks of a live process's threads, taken with gdb (when installed;
/// `scripts/install-deps.sh --test` installs it): what a child that does not
/// stop was waiting for.
public struct ThreadDump: Sendable {
    /// One line per distinct stack: how many threads, their names, and the
    /// innermost frames' functions (demangled), innermost first.
    public var summary: [String]

    /// Attaches gdb to `pid`, writes its whole output to `file`, and condenses it.
    public static func take(pid: pid_t, savingTo file: URL, frames: Int = 12) async -> ThreadDump {
        guard let result = try? await runCommand("gdb", ["-p", "\(pid)", "-batch", "-nx", "-ex", "thread apply all bt \(frames)"], timeout: 60),
              result.stdout.contains("Thread ") else {
            return ThreadDump(summary: ["(no thread dump: gdb missing or could not attach)"])
        }
        try? Data(result.stdout.utf8).write(to: file)
        let threads = parse(result.stdout)
        let names = await demangled(Set(threads.flatMap(\.frames)))
        var groups: [[String]: [String]] = [:]
        for thread in threads { groups[thread.frames.map { names[$0] ?? $0 }, default: []].append(thread.name) }
        let summary = groups.sorted { $0.value.count > $1.value.count }.map { stack, threadNames in
            "\(threadNames.count)× [\(Set(threadNames).sorted().joined(separator: ", "))]: \(stack.joined(separator: " ← "))"
        }
        return ThreadDump(summary: summary + ["(whole dump: \(file.path))"])
    }

    /// Each thread's name and its frames' function names, from gdb's
    /// `Thread N (Thread 0x… (LWP n) "name"):` headers and `#k  0x… in f (…)` lines.
    static func parse(_ text: String) -> [(name: String, frames: [String])] {
        var threads: [(name: String, frames: [String])] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("Thread ") {
                let quoted = line.split(separator: "\"", omittingEmptySubsequences: false)
                threads.append((quoted.count >= 3 ? String(quoted[1]) : "?", []))
            } else if line.hasPrefix("#"), !threads.isEmpty {
                var rest = line.drop { $0 != " " }.drop { $0 == " " }
                if let range = rest.range(of: " in ") { rest = rest[range.upperBound...] }
                let function = rest.prefix { $0 != " " && $0 != "(" }
                threads[threads.count - 1].frames.append(String(function))
            }
        }
        return threads
    }

    /// Swift symbols as `swift demangle --simplified` reads them; others as they are.
    static func demangled(_ symbols: Set<String>) async -> [String: String] {
        let mangled = symbols.filter { $0.hasPrefix("$s") }.sorted()
        guard !mangled.isEmpty,
              let result = try? await runCommand("swift", ["demangle", "--simplified", "--compact"],
                                                 input: Data(mangled.joined(separator: "\n").utf8), timeout: 60),
              result.status == 0 else { return [:] }
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.count >= mangled.count else { return [:] }
        // A frame's name is cut at its argument list: the summary stays one line per stack.
        return Dictionary(uniqueKeysWithValues: zip(mangled, lines).map { ($0, String($1.prefix { $0 != "(" }.prefix(120))) })
    }
}
