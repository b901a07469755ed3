import FerryCore
import Foundation
import Synchronization
import FerryConcurrency

/// The result of a finished command.
public struct CommandResult: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
}

public struct CommandFailed: Error, CustomStringConvertible {
    public var description: String
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which
/// Swift's Glibc module does not declare.
private let addCloseFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
    guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return nil }  // nil: RTLD_DEFAULT
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
}()

/// glibc's `posix_spawn_file_actions_addchdir_np` (2.29 and later), likewise undeclared.
private let addChdir: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32)? = {
    guard let symbol = dlsym(nil, "posix_spawn_file_actions_addchdir_np") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32).self)
}()

/// Starts `executable` (looked up in PATH unless absolute) with posix_spawn,
/// its stdin, stdout and stderr bound to the given files. Foundation's Process
/// is avoided: its waitUntilExit can spin forever on Linux.
func spawn(_ executable: String, _ arguments: [String], environment: [String: String],
           stdin: String, stdout: String, stderr: String, workingDirectory: String? = nil) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    // Relative paths the child writes (a generated setting such as " padded ") land
    // there, not in the checkout the tests run from.
    if let workingDirectory {
        guard let addChdir, addChdir(&actions, workingDirectory) == 0 else {
            throw CommandFailed(description: "cannot start \(executable) in \(workingDirectory): glibc's posix_spawn_file_actions_addchdir_np (2.29+) is missing or failed")
        }
    }
    posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    // Nothing else of this process: sockets and files opened without O_CLOEXEC
    // (the loopback servers', libcurl's) would live on in the child. A server's
    // connection closed here then stays open for its client, which sends its
    // next request into it and waits out curl's 30 s cut-off (HeaderInjectionTests
    // failed that way in a full run, when another test started a worker).
    guard let addCloseFrom, addCloseFrom(&actions, 3) == 0 else {
        throw CommandFailed(description: "cannot start \(executable): glibc's posix_spawn_file_actions_addclosefrom_np (2.34+) is missing")
    }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    // Own process group, so a stop reaches the child's children too. An empty
    // signal mask and default dispositions: a child inherits the spawning
    // thread's mask, and Dispatch and Swift's pool threads block signals, so a
    // server such as moto never saw SIGTERM and each stop waited out its 20 s.
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    posix_spawnattr_setpgroup(&attributes, 0)
    var noSignals = sigset_t()
    sigemptyset(&noSignals)
    posix_spawnattr_setsigmask(&attributes, &noSignals)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGQUIT] { sigaddset(&defaults, signal) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)

    let env = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0.key)=\($0.value)" }
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = env.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
    var pid: pid_t = 0
    let rc = SpawnLock.holding { posix_spawnp(&pid, executable, &actions, &attributes, argv, envp) }
    guard rc == 0 else { throw CommandFailed(description: "cannot start \(executable): \(String(cString: strerror(rc)))") }
    return pid
}

/// Waits for `pid` without blocking the cooperative pool; returns its exit status
/// (128 + signal when it was killed).
func waitForExit(_ pid: pid_t) async -> Int32 {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            continuation.resume(returning: exitCode(status))
        }
    }
}

func exitCode(_ status: Int32) -> Int32 {
    let signal = status & 0x7f
    return signal == 0 ? (status >> 8) & 0xff : 128 + signal
}

/// Runs a command to completion; stdin from `input`. Killed after `timeout` seconds.
public func runCommand(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                       input: Data? = nil, timeout: Double = 120, workingDirectory: URL? = nil) async throws -> CommandResult {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-cmd-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let inPath = dir.appendingPathComponent("in").path, outPath = dir.appendingPathComponent("out").path
    let errPath = dir.appendingPathComponent("err").path
    try (input ?? Data()).write(to: URL(fileURLWithPath: inPath))
    let pid = try spawn(executable, arguments, environment: environment, stdin: inPath, stdout: outPath, stderr: errPath,
                        workingDirectory: workingDirectory?.path)
    let timer = DispatchWorkItem { kill(-pid, SIGKILL) }
    DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: timer)
    let status = await waitForExit(pid)
    timer.cancel()
    let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
    let err = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    return CommandResult(status: status, stdout: out, stderr: err)
}

/// Like `runCommand`, but throws with the command's output when it exits non-zero.
@discardableResult
public func runChecked(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                       input: Data? = nil, timeout: Double = 120) async throws -> String {
    let result = try await runCommand(executable, arguments, environment: environment, input: input, timeout: timeout)
    guard result.status == 0 else {
        throw CommandFailed(description: "\(executable) \(arguments.joined(separator: " ")) exited \(result.status): \(result.stderr)\(result.stdout)")
    }
    return result.stdout
}

/// A long-running child (a server, a worker) whose output goes to a log file.
/// It is killed when stopped or deallocated.
public final class BackgroundProcess: Sendable {
    public let pid: pid_t
    public let logFile: URL
    public let name: String
    /// Where this process's output starts in `logFile`: a process started
    /// again under the same name appends to its predecessor's log.
    private let logStart: Int
    private let reaped = Atomic<Bool>(false)

    public init(name: String, executable: String, arguments: [String], environment: [String: String] = [:],
                logDirectory: URL, workingDirectory: URL? = nil) throws {
        self.name = name
        logFile = logDirectory.appendingPathComponent("\(name).log")
        logStart = ((try? FileManager.default.attributesOfItem(atPath: logFile.path))?[.size] as? Int) ?? 0
        pid = try spawn(executable, arguments, environment: environment, stdin: "/dev/null",
                        stdout: logFile.path, stderr: logFile.path, workingDirectory: workingDirectory?.path)
    }

    /// Whether the process has not exited (a zombie counts as exited).
    public var isRunning: Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
        guard let close = stat.lastIndex(of: ")") else { return false }
        let state = stat[stat.index(close, offsetBy: 2)]
        return state != "Z" && state != "X"
    }

    /// What this process has written to its log.
    public var log: String {
        guard let data = try? Data(contentsOf: logFile), data.count >= logStart else { return "" }
        return String(decoding: data.dropFirst(logStart), as: UTF8.self)
    }

    /// Sends `signal` and waits up to `timeout` seconds for the exit, then
    /// SIGKILLs the process group. Returns the exit status. A process that
    /// overstays has its threads' stacks printed first (`ThreadDump`), so a
    /// stop that hangs once in a CI run says where.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM, timeout: Double = 20) async -> Int32 {
        let start = ContinuousClock.now
        kill(pid, signal)
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning && Date() < deadline { try? await Task.sleep(for: .milliseconds(50)) }
        if isRunning {
            let dump = await ThreadDump.take(pid: pid, savingTo: logFile.deletingPathExtension().appendingPathExtension("threads.txt"))
            print("""
                \(name) (pid \(pid)) still running \(ContinuousClock.now - start) after signal \(signal): killing it. \
                The end of its log:
                \(log.suffix(3000))
                Its threads (\(dump.summary.count) distinct stacks):
                \(dump.summary.joined(separator: "\n"))
                """)
            fflush(nil)
            kill(-pid, SIGKILL)
        }
        let status = await waitForExit(pid)
        reaped.store(true, ordering: .releasing)
        return status
    }

    deinit {
        guard !reaped.load(ordering: .acquiring) else { return }
        kill(-pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, WNOHANG)
    }
}

/// Polls `condition` until it holds or `timeout` passes; returns whether it held.
public func eventually(timeout: Double = 30, every interval: Double = 0.2,
                       _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .seconds(interval))
    }
    return try await condition()
}

extension BackgroundProcess {
    /// The port this server says in its log that it listens on: the digits
    /// after `prefix` in the first line that holds `marker` and `prefix`.
    /// Test servers bind port 0 and announce the port they got. A port picked
    /// free beforehand can be taken before the server binds it (a CI run lost
    /// one that way: EADDRINUSE).
    public func announcedPort(line marker: String = "", after prefix: String, timeout: Double = 60) async throws -> Int {
        var port: Int?
        let announced = await eventually(timeout: timeout, every: 0.05) {
            let log = self.log
            let written = log[..<(log.lastIndex(of: "\n") ?? log.startIndex)]  // whole lines only
            for line in written.split(separator: "\n") where marker.isEmpty || line.contains(marker) {
                guard let range = line.range(of: prefix) else { continue }
                port = Int(line[range.upperBound...].prefix(while: \.isNumber))
                if port != nil { return true }
            }
            return !self.isRunning
        }
        guard announced, let port else {
            throw CommandFailed(description: "\(name) did not announce its port (\(isRunning ? "still running" : "exited")): \(log.suffix(3000))")
        }
        return port
    }

    /// The address of a worker's HTTP endpoints, started with `--http-address 127.0.0.1:0`.
    public func workerHTTPEndpoint(timeout: Double = 60) async throws -> String {
        "http://127.0.0.1:\(try await announcedPort(line: "HTTP endpoints", after: "on 127.0.0.1:", timeout: timeout))"
    }
}
