import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// The `ferry` binary as a user meets it: help, versions, and clear refusals.
@Suite struct CommandLineTests {
    let ferry = TestPaths.ferryBinary
    let credentials = ["AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"]

    @Test(arguments: ["dev", "worker", "enqueue", "cp", "presign", "uploads", "pause", "resume", "cancel", "triggers", "triggers list",
                      "triggers test", "config check", "status", "watch", "version"])
    func everySubcommandHelpHasExamples(subcommand: String) async throws {
        let help = try await runChecked(ferry, subcommand.split(separator: " ").map(String.init) + ["--help"])
        #expect(help.contains("Example"), "\(subcommand) --help has no example")
    }

    @Test func versionNamesTheCLibraries() async throws {
        let out = try await runChecked(ferry, ["version"])
        #expect(out.contains("librdkafka 2."))
        #expect(out.contains("libcurl/"))
        #expect(out.contains("SQLite 3."))
    }

    @Test(arguments: [
        (["worker", "--bootstrap-servers", "x"], "no data root"),
        (["worker", "--bootstrap-servers", "x", "--data-root", "/nonexistent-ferry"], "does not exist"),
        (["worker", "--bootstrap-servers", "x", "--data-root", "/tmp", "--s3-endpoint", "ftp://x"], "http(s) URL"),
        (["worker", "--bootstrap-servers", "x", "--data-root", "/tmp", "--role", "boss"], "--role"),
        (["worker", "--bootstrap-servers", "x", "--data-root", "/tmp", "--conditional-writes", "maybe"], "--conditional-writes must be auto, on or off"),
        (["worker", "--bootstrap-servers", "x", "--data-root", "/tmp", "--part-size", "1MiB"], "--part-size must be 5 MiB…5 GiB"),
        (["cp", "/etc/hostname", "s3://bkt/k", "--transfer-timeout", "nan"], "--transfer-timeout must be 1…604800 seconds, got nan"),
        (["worker", "--bootstrap-servers", "x", "--data-root", "/tmp", "--https-sources", "--https-source-allow-range", "nope"], "address range"),
        (["worker", "--bootstrap-servers", "x", "--data-root", "/tmp", "--admin-token-file", "/proc/sys/kernel/ostype"], "at least 16 printable"),
        (["worker", "--bootstrap-servers", "x", "--data-root", "/tmp", "--admin-token-file", "/nonexistent-token"], "cannot read the admin token"),
        (["worker", "--bootstrap-servers", "x", "--data-root", "/tmp", "--http-address", "999.1.1.1:80"], "is not an IPv4 address"),
        (["worker", "--bootstrap-servers", "x", "--data-root", "/tmp", "--state-dir", "/etc/hostname"], "exists and is not a directory"),
        (["config", "check", "--bootstrap-servers", "x", "--data-root", "/tmp", "--log-level", "loud"], "unknown log level 'loud'"),
        (["config", "check", "--bootstrap-servers", "x", "--data-root", "/tmp", "--state-dir", "/tmp/ferry-state-inside"],
         "--state-dir /tmp/ferry-state-inside lies inside the data root /tmp"),
        (["worker", "--bootstrap-servers", "x", "--data-root", "/", "--state-dir", "/var/lib/ferry-test-state"], "lies inside the data root /"),
        (["config", "check", "--bootstrap-servers", "x", "--data-root", "/tmp", "--state-dir", "/var/lib/ferry-test-state",
          "--trigger-output-dir", "/tmp/outputs"], "--trigger-output-dir /tmp/outputs lies inside the data root /tmp"),
        (["config", "check", "--bootstrap-servers", "x", "--data-root", "/tmp", "--data-root-layout", "flat"],
         "--data-root-layout must be shared or access-levels"),
        (["config", "check", "--bootstrap-servers", "x", "--data-root", "/tmp", "--auth-mode", "jwt", "--jwt-secret-file", "/etc/hostname",
          "--data-root-layout", "shared"], "--data-root-layout shared cannot go with --auth-mode jwt"),
        (["config", "check", "--bootstrap-servers", "x", "--data-root", "/tmp", "--role", "ingest"], "--role ingest needs the buckets"),
        (["config", "check", "--bootstrap-servers", "x", "--data-root", "/tmp", "--role", "ingest", "--ingest-bucket", "Bad_Bucket"],
         "--ingest-bucket: bucket name 'Bad_Bucket'"),
        (["config", "check", "--bootstrap-servers", "x", "--data-root", "/tmp", "--local-store", "/etc/hostname/store"], "Not a directory"),
        (["dev", "--kafka-only", "--http-address", "nonsense"], "is not HOST:PORT"),
        (["cp", "/etc/hostname", "s3://"], "names no bucket and key"),
        (["cp", "/etc/hostname", "s3:///key"], "names no bucket and key"),
        (["cp", "a", "b"], "one side must be s3://"),
        (["cp", "s3://bkt/k", "-"], "'-' as the destination: ferry cp does not stream standard input or output"),
        (["cp", "-", "s3://bkt/k"], "'-' as the source"),
        (["worker", "--bootstrap-servers", "x", "--data-root", "/tmp", "--s3-endpoint", "http://u:p@127.0.0.1:7480"], "carries credentials"),
        (["triggers", "test", "audit-log", "--event", "/tmp"], "cannot read the event file /tmp: it is a directory"),
        (["cp", "/etc", "s3://bkt/etc/"], "'/etc' is a directory: copy it with --recursive"),
        (["cp", "s3://bkt/photos/", "/tmp"], "names a prefix, not an object: copy it with --recursive"),
        (["presign", "delete", "s3://b/k"], "get or put"),
        (["enqueue", "explode", "--bucket", "b", "--key", "k", "--bootstrap-servers", "x"], "unknown operation"),
        (["enqueue", "upload", "--bucket", "bkt", "--key", "k", "--bootstrap-servers", "x"], "upload needs a source"),
        (["enqueue", "delete", "--bucket", "b", "--key", "k", "--bootstrap-servers", "x", "--metadata", "bad"], "NAME=VALUE"),
        (["items", "put", "--table", "posts:id", "--bootstrap-servers", "x", "--item", #"{"id":"p","n":1e999}"#],
         "'--item.n' is out of DynamoDB's number range"),
        // Held to what a worker takes (StrictJSON): a name given twice, a trailing comma.
        (["items", "put", "--table", "posts:id", "--bootstrap-servers", "x", "--item", #"{"id":"p","id":"q"}"#],
         "--item: member 'id' appears more than once in its object (at byte 10)"),
        (["items", "put", "--table", "posts:id", "--bootstrap-servers", "x", "--item", #"{"id":"p",}"#],
         "--item is not valid JSON: a comma before '}' at byte 9"),
        (["cancel", "bad id!", "--bootstrap-servers", "x"], "'bad id!' is no transfer id"),
        (["pause", String(repeating: "i", count: 129), "--bootstrap-servers", "x"], "is no transfer id"),
        (["status", "a/b", "--bootstrap-servers", "x"], "'a/b' is no transfer id"),
        (["items", "put", "--table", "posts:id", "--bootstrap-servers", "x", "--item", "[1]"], "--item must be a JSON object ({…}), got an array"),
        (["items", "put", "--table", "posts:id", "--bootstrap-servers", "x", "--item", "7"], "got a single value"),
        (["enqueue", "upload", "--bucket", "b", "--key", "k", "--source", "data:,x", "--bootstrap-servers", "x", "--part-size", "4MiB"],
         "--part-size must be 5 MiB…5 GiB"),
        (["enqueue", "upload", "--bucket", "b", "--key", "k", "--source", "data:,x", "--bootstrap-servers", "x", "--part-concurrency", "0"],
         "--part-concurrency must be 1…64"),
        (["enqueue", "upload", "--bucket", "b", "--key", "k", "--source", "data:,x", "--bootstrap-servers", "x", "--transfer-timeout", "nan"],
         "--transfer-timeout must be 1…604800 seconds"),
        (["enqueue", "upload", "--bucket", "b", "--key", "k", "--source", "data:,x", "--bootstrap-servers", "x", "--checksum", "md5"],
         "--checksum must be CRC32C, CRC32, SHA256 or NONE, got 'md5'"),
        // How long to wait: refused before anything is sent (a NaN waited no time and printed Int.min seconds).
        (["enqueue", "delete", "--bucket", "bkt", "--key", "k", "--bootstrap-servers", "x", "--wait", "--timeout", "nan"],
         "--timeout must be 0.1…2592000.0, got nan"),
        (["enqueue", "delete", "--bucket", "bkt", "--key", "k", "--bootstrap-servers", "x", "--wait", "--timeout=-5"], "--timeout must be"),
        (["watch", "--bootstrap-servers", "x", "--for", "inf"], "--for must be 0.1…2592000.0, got inf"),
        (["items", "put", "--table", "posts:id", "--bootstrap-servers", "x", "--item", #"{"id":"p"}"#, "--wait", "--timeout", "0"],
         "--timeout must be"),
        (["items", "download", "--table", "posts:id", "--bootstrap-servers", "x", "--key", #"{"id":"p"}"#, "--attribute", "a",
          "--to", "/tmp/x", "--timeout", "1e99"], "--timeout must be"),
    ])
    func badUsageExits64WithTheReason(arguments: [String], reason: String) async throws {
        let result = try await runCommand(ferry, arguments, environment: credentials)
        #expect(result.status == 64, "\(arguments): exit \(result.status)")
        #expect(result.stderr.contains(reason), "\(arguments): \(result.stderr)")
    }

    /// `ferry triggers test` refuses an event a worker would refuse: one that names a member twice.
    @Test func triggersTestRefusesAnEventThatNamesAMemberTwice() async throws {
        let dir = try TestPaths.temporaryDirectory("event-twice")
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("event.json")
        try Data(#"{"Records":[{"eventName":"ObjectCreated:Put","eventName":"ObjectRemoved:Delete"}]}"#.utf8).write(to: file)
        let result = try await runCommand(ferry, ["triggers", "test", "audit-log", "--event", file.path], environment: credentials)
        #expect(result.status == 64, "exit \(result.status): \(result.stderr)")
        #expect(result.stderr.contains("\(file.path): member 'Records[0].eventName' appears more than once"), "\(result.stderr)")
    }

    /// The README's first command: `ferry dev --demo` runs the embedded default end to end and exits 0.
    @Test func theEmbeddedDemoRunsAndExitsZero() async throws {
        let dir = try TestPaths.temporaryDirectory("demo")
        defer { try? FileManager.default.removeItem(at: dir) }
        let result = try await runCommand(ferry, ["dev", "--demo", "--data-root", dir.appendingPathComponent("data").path,
                                                  "--store-dir", dir.appendingPathComponent("objects").path,
                                                  "--state-dir", dir.appendingPathComponent("state").path], timeout: 120)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("byte-identical") && result.stdout.contains("Demo finished"), "\(result.stdout)")
        #expect(result.stdout.contains(#""eventName":"ObjectCreated:Put""#))
    }

    /// `ferry dev --kafka-only` started, and its bootstrap address once it printed it.
    func kafkaOnly(partitions: Int, logs dir: URL) async throws -> (BackgroundProcess, String) {
        let process = try BackgroundProcess(name: "kafka-only", executable: ferry, arguments: ["dev", "--kafka-only", "--partitions", "\(partitions)"],
                                            logDirectory: dir)
        var bootstrap = ""
        let started = await eventually(timeout: 20) {
            bootstrap = process.log.split(separator: "\n").first { $0.hasPrefix("Kafka bootstrap: ") }.map { String($0.dropFirst(17)) } ?? ""
            return !bootstrap.isEmpty
        }
        try #require(started, "ferry dev --kafka-only printed no bootstrap address: \(process.log.suffix(1500))")
        return (process, bootstrap)
    }

    /// `ferry dev --kafka-only`: just the embedded cluster, reachable by kcat, stopped by SIGTERM.
    @Test func kafkaOnlyServesTheEmbeddedCluster() async throws {
        let dir = try TestPaths.temporaryDirectory("kafka-only")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (process, bootstrap) = try await kafkaOnly(partitions: 2, logs: dir)
        let metadata = try await runChecked("kcat", ["-L", "-b", bootstrap, "-t", "ferry.requests"])
        #expect(metadata.contains("2 partitions"), "\(metadata)")
        #expect(await process.stop() == 0)
    }

    /// `ferry enqueue --wait` prints the id when the request is sent, not when
    /// the wait ends, also into a pipe or file (stdout is then block-buffered):
    /// it is what a second shell cancels or follows the transfer by.
    @Test func enqueueWaitPrintsTheIdAtOnce() async throws {
        let dir = try TestPaths.temporaryDirectory("enqueue-id-at-once")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (kafka, bootstrap) = try await kafkaOnly(partitions: 1, logs: dir)
        defer { Task { await kafka.stop() } }
        // No worker runs: the wait lasts until stopped.
        let enqueue = try BackgroundProcess(name: "enqueue", executable: ferry,
                                            arguments: ["enqueue", "delete", "--bucket", "bkt", "--key", "k", "--id", "id-at-once-1",
                                                        "--bootstrap-servers", bootstrap, "--wait", "--timeout", "120"],
                                            logDirectory: dir)
        let printed = await eventually(timeout: 20) { enqueue.log.contains("id-at-once-1") }
        #expect(printed && enqueue.isRunning, "no id while waiting: \(enqueue.log)")
        await enqueue.stop(signal: SIGKILL)
    }

    /// `ferry enqueue`'s transfer flags become the request's `options` object, as
    /// the README's request JSON names it; without them the request has none.
    /// A download's destination ending in `/` gets the key's name.
    @Test func enqueueFlagsBecomeTheRequestsOptions() async throws {
        let dir = try TestPaths.temporaryDirectory("enqueue-options")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (process, bootstrap) = try await kafkaOnly(partitions: 1, logs: dir)
        let common = ["enqueue", "upload", "--bucket", "bkt", "--key", "k", "--source", "data:,x", "--bootstrap-servers", bootstrap]
        _ = try await runChecked(ferry, common + ["--id", "with", "--part-size", "16MiB", "--part-concurrency", "2", "--retry-limit", "0",
                                                  "--transfer-timeout", "90", "--checksum", "crc32", "--accelerate"])
        _ = try await runChecked(ferry, common + ["--id", "without"])
        // A key ending in `/` is a folder: the upload lands there under the file's name.
        _ = try await runChecked(ferry, ["enqueue", "upload", "--bucket", "bkt", "--key", "photos/", "--source", "/srv/in/cat.jpg",
                                         "--bootstrap-servers", bootstrap, "--id", "into-folder"])
        // A destination ending in `/` is a folder: the request names the file in it (the key's last segment).
        _ = try await runChecked(ferry, ["enqueue", "download", "--bucket", "bkt", "--key", "photos/cat.jpg", "--destination", dir.path + "/out/",
                                         "--bootstrap-servers", bootstrap, "--id", "folder"])
        let records = try await Kcat(bootstrapServers: bootstrap).consumeAll(topic: "ferry.requests")
        var options: [String: [String: Any]] = [:]
        var destinations: [String: String] = [:]
        for record in records {
            let json = try #require(try JSONSerialization.jsonObject(with: Data(record.value.utf8)) as? [String: Any])
            options[json["id"] as? String ?? ""] = json["options"] as? [String: Any] ?? [:]
            destinations[json["id"] as? String ?? ""] = json["destination"] as? String
            if json["id"] as? String == "into-folder" { #expect(json["key"] as? String == "photos/cat.jpg", "\(json)") }
        }
        #expect(options.keys.contains("into-folder"))
        #expect(destinations["folder"] == URL(fileURLWithPath: dir.path + "/out/cat.jpg").absoluteString, "\(destinations)")
        let with = try #require(options["with"])
        #expect(with["partSizeBytes"] as? Int == 16 << 20 && with["partConcurrency"] as? Int == 2 && with["retryLimit"] as? Int == 0)
        #expect(with["timeoutSeconds"] as? Double == 90 && with["checksumAlgorithm"] as? String == "CRC32" && with["accelerate"] as? Bool == true,
                "\(with)")
        #expect(options["without"]?.isEmpty == true, "\(records.map(\.value))")
        #expect(await process.stop() == 0)
    }

    /// The status topic can be written by any producer with access, and error
    /// messages carry stores' words: `ferry transfers` and `ferry status` print
    /// no control character or bidirectional override from them (an escape
    /// sequence could clear the screen, retitle the terminal or fake lines),
    /// on generated statuses (seeded) with hostile text in every text field.
    /// `ferry watch` off a terminal prints a line per status and keeps none: it
    /// held every status it had seen, so a watch left running over a busy fleet
    /// grew without end (30,000 statuses of 3 KB: RSS 162 MB, now 51 MB).
    @Test func watchKeepsNoStatusesOffATerminal() async throws {
        let dir = try TestPaths.temporaryDirectory("watch-memory")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (kafka, bootstrap) = try await kafkaOnly(partitions: 4, logs: dir)
        let watch = try BackgroundProcess(name: "watch", executable: ferry, arguments: ["watch", "--bootstrap-servers", bootstrap],
                                          logDirectory: dir)
        try #require(await eventually(timeout: 20) { watch.log.contains("watching ferry.status") }, "\(watch.log)")
        func rssMiB() -> Double {
            let status = (try? String(contentsOfFile: "/proc/\(watch.pid)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
            return (Double(line.split(separator: " ").dropFirst().first ?? "") ?? 0) / 1024
        }
        let message = String(repeating: "m", count: 5000)
        var base = 0.0
        for batch in 0..<5 {
            let statuses = try (0..<2000).map { index -> (key: String, value: String) in
                let status: [String: Any] = ["id": "flood-\(batch)-\(index)", "op": "upload", "state": "failed", "worker": "w",
                                             "time": "2026-11-28T04:03:07.850Z", "error": ["code": "StorageError", "message": message]]
                return (key: "flood-\(batch)-\(index)", value: String(decoding: try JSONSerialization.data(withJSONObject: status), as: UTF8.self))
            }
            try await Kcat(bootstrapServers: bootstrap).produceMany(topic: "ferry.status", statuses)
            let shown = await eventually(timeout: 60) { watch.log.components(separatedBy: "flood-").count - 1 == 2000 * (batch + 1) }
            try #require(shown, "batch \(batch): \(watch.log.components(separatedBy: "flood-").count - 1) lines")
            if batch == 0 {
                base = rssMiB()
                // What is not a status is skipped, and said so.
                try await Kcat(bootstrapServers: bootstrap).produceMany(topic: "ferry.status", [(key: "junk", value: "{\"id\": 7}")])
                try #require(await eventually(timeout: 20) { watch.log.contains("skipped a message that is not a status: ferry.status[") },
                             "\(watch.log.suffix(1000))")
                #expect(watch.log.contains("wrong type for 'id' (expected a string)"), "\(watch.log.suffix(1000))")
            }
        }
        // 8,000 statuses of 5 KB after the first 2,000: 40 MB if they were kept.
        let grown = rssMiB() - base
        // Under a sanitizer (scripts/tsan.sh) the process's memory is mostly the sanitizer's.
        if ProcessInfo.processInfo.environment["FERRY_TEST_SANITIZER"] == nil {
            #expect(grown < 20, "ferry watch grew by \(grown) MiB over 8,000 statuses")
        }
        await watch.stop()
        await kafka.stop()
    }

    /// A watch whose output nobody reads (a pipe on hold, a stopped pager)
    /// stops reading the topic: its memory stays bounded, and once the pipe is
    /// read again every status comes out, none lost. Its reader used to queue
    /// every status it fetched without bound while the pipe was full.
    @Test func aWatchThatCannotPrintStopsReadingAndLosesNothing() async throws {
        let dir = try TestPaths.temporaryDirectory("watch-blocked")
        defer { try? FileManager.default.removeItem(at: dir) }
        // 8 partitions: the mock cluster keeps 5 MiB of each, and all that is sent must stay.
        let (kafka, bootstrap) = try await kafkaOnly(partitions: 8, logs: dir)
        let watch = Process()
        watch.executableURL = URL(fileURLWithPath: ferry)
        watch.arguments = ["watch", "--bootstrap-servers", bootstrap]
        let output = Pipe()
        watch.standardOutput = output
        watch.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try watch.run()
        defer { if watch.isRunning { watch.terminate() } }
        let first = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        try #require(first.contains("watching ferry.status"), "\(first)")
        func rssMiB() -> Double {
            let status = (try? String(contentsOfFile: "/proc/\(watch.processIdentifier)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
            return (Double(line.split(separator: " ").dropFirst().first ?? "") ?? 0) / 1024
        }
        let base = rssMiB()
        // 6,000 statuses of 5 KB: 30 MB that stay on the broker while the pipe is full.
        let message = String(repeating: "m", count: 5000)
        let count = 6_000
        for batch in 0..<5 {
            let statuses = try (0..<count / 5).map { index -> (key: String, value: String) in
                let id = "held-\(batch * count / 5 + index)"
                let status: [String: Any] = ["id": id, "op": "upload", "state": "failed", "worker": "w",
                                             "time": "2026-11-28T04:03:07.850Z", "error": ["code": "StorageError", "message": message]]
                return (key: id, value: String(decoding: try JSONSerialization.data(withJSONObject: status), as: UTF8.self))
            }
            try await Kcat(bootstrapServers: bootstrap).produceMany(topic: "ferry.status", statuses)
        }
        // Until the resident size has held still for 3 s (at most 60 s).
        var sizes: [Double] = []
        let settle = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < settle {
            sizes.append(rssMiB())
            if sizes.count >= 7 && sizes.suffix(7).max()! - sizes.suffix(7).min()! < 1 { break }
            try await Task.sleep(for: .milliseconds(500))
        }
        let grown = rssMiB() - base
        print("blocked watch: RSS \(base) MiB, then \(grown) MiB more with \(count) statuses of 5 KB waiting")
        if ProcessInfo.processInfo.environment["FERRY_TEST_SANITIZER"] == nil {
            #expect(grown < 25, "a watch that cannot print grew by \(grown) MiB over \(count) statuses of 5 KB")
        }
        // Read the pipe again: every status is printed.
        let reader = Task.detached { () -> Int in
            var ids = Set<Substring>()
            var pending = Data()
            while ids.count < count {
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                guard let cut = pending.lastIndex(of: UInt8(ascii: "\n")) else { continue }
                let text = String(decoding: pending[..<cut], as: UTF8.self)
                pending = Data(pending[(cut + 1)...])
                for line in text.split(separator: "\n") {
                    if let range = line.range(of: "held-") {
                        ids.insert(line[range.lowerBound...].prefix { !$0.isWhitespace })
                    }
                }
            }
            return ids.count
        }
        // The watch is stopped after 120 s at most, which ends the reader.
        let deadline = Task { try await Task.sleep(for: .seconds(120)); watch.terminate() }
        let shown = await reader.value
        deadline.cancel()
        #expect(shown == count, "statuses printed once the pipe was read: \(shown) of \(count)")
        watch.terminate()
        await kafka.stop()
    }

    @Test func statusesPrintNoControlCharacters() async throws {
        let dir = try TestPaths.temporaryDirectory("status-terminal")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (process, bootstrap) = try await kafkaOnly(partitions: 1, logs: dir)
        var rng = SeededGenerator(seed: 0x7E47)
        let nasty = ["\u{1B}[2J", "\u{1B}]0;pwned\u{7}", "\r\nfake line", "\u{9B}31m", "\u{7F}", "\u{202E}txt.exe", "\u{2066}", "\u{0}", "\t", "ok"]
        func text() -> String { (0..<Int.random(in: 1...4, using: &rng)).map { _ in nasty.randomElement(using: &rng)! }.joined() }
        var messages: [(key: String, value: String)] = []
        for index in 0..<30 {
            let status: [String: Any] = ["id": "t-\(index)" + (index % 3 == 0 ? text() : ""), "op": "upload", "state": "failed", "worker": text(),
                                         "time": "2026-11-28T04:03:07.850Z", "error": ["code": text(), "message": text()],
                                         "object": ["bucket": "b", "key": "k" + text(), "eTag": text()]]
            let json = String(decoding: try JSONSerialization.data(withJSONObject: status), as: UTF8.self)
            messages.append((key: "t-\(index)", value: json))
        }
        try await Kcat(bootstrapServers: bootstrap).produceMany(topic: "ferry.status", messages + [(key: "junk", value: "{\"id\": 7}")])
        let listed = try await runCommand(ferry, ["transfers", "--bootstrap-servers", bootstrap])
        let list = listed.stdout
        // What is not a status is counted and the first one named, on standard error.
        #expect(listed.status == 0 && listed.stderr.contains("skipped 1 message(s) that are not statuses; the first: ferry.status[0] at offset 30: "
                                                            + "wrong type for 'id' (expected a string)"), "\(listed.stderr)")
        // Exit 1: the transfer failed; the line is what matters.
        let one = try await runCommand(ferry, ["status", "t-1", "--bootstrap-servers", bootstrap]).stdout
        #expect(list.contains("30 transfer(s)"), "\(list)")
        // --json escapes them as JSON (C1 and bidirectional overrides too), so each line still parses to what was sent.
        let json = try await runChecked(ferry, ["transfers", "--json", "--bootstrap-servers", bootstrap])
        var workers: [String: String] = [:]
        for line in json.split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
            workers[object["id"] as? String ?? ""] = object["worker"] as? String
        }
        for message in messages {
            let sent = try #require(try JSONSerialization.jsonObject(with: Data(message.value.utf8)) as? [String: Any])
            #expect(workers[sent["id"] as? String ?? ""] == sent["worker"] as? String, "\(message.value)")
        }
        for output in [list, one, json] {
            let unsafe = output.unicodeScalars.filter {
                ($0.properties.generalCategory == .control && $0 != "\n") || (0x202A...0x202E).contains($0.value) || (0x2066...0x2069).contains($0.value)
            }
            #expect(unsafe.isEmpty, "\(unsafe.map { String($0.value, radix: 16) }) in \(output.debugDescription)")
            #expect(output.contains("\\u{1B}") || output.contains("\\u001b"), "the escapes are shown as text: \(output)")
        }
        #expect(await process.stop() == 0)
    }

    /// A store's error message reaches the log (retry lines) and the failure
    /// line: in text format neither carries its control characters, so it
    /// cannot fake log lines or drive the terminal of whoever reads them.
    @Test func aStoresErrorTextIsShownWithoutItsControlCharacters() async throws {
        let server = try HTTPAnswerer { _ in
            ("HTTP/1.1 503 Service Unavailable", .fixed(Array(
                "<Error><Code>SlowDown</Code><Message>wait\u{1B}[2J\u{1B}]0;pwned\u{7}\r\n2026-01-01T00:00:00+0000 info forged line</Message></Error>".utf8)))
        }
        let result = try await runCommand(ferry, ["cp", "/etc/hostname", "s3://bkt/k", "--s3-endpoint", "http://127.0.0.1:\(server.port)",
                                                  "--retry-limit", "1", "--log-level", "warning"], environment: credentials)
        #expect(result.status == 1, "\(result.stderr)")
        let output = result.stdout + result.stderr
        #expect(output.contains("forged line"), "the message is shown: \(output)")
        let unsafe = output.unicodeScalars.filter { $0.properties.generalCategory == .control && $0 != "\n" }
        #expect(unsafe.isEmpty, "\(unsafe.map { String($0.value, radix: 16) }) in \(output.debugDescription)")
        #expect(!output.split(separator: "\n").contains { $0.hasPrefix("2026-01-01T00:00:00+0000 info forged") }, "\(output)")
    }

    /// `ferry config check`: file < FERRY_* variables < flags, secrets redacted,
    /// an unknown key named with its path, exit 64 for what the worker would refuse.
    @Test func configCheckShowsTheEffectiveConfigurationAndItsSources() async throws {
        let dir = try TestPaths.temporaryDirectory("config")
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("worker.yaml")
        // The data root apart from the HOME made below: the worker refuses a credentials file inside it.
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("data"), withIntermediateDirectories: true)
        try """
            kafka:
              bootstrapServers: kafka:9092
              properties: {security.protocol: SASL_SSL, sasl.mechanism: PLAIN}
            worker:
              dataRoot: \(dir.path)/data
              maxTransfers: 4
              shutdownGrace: 12
            transfers:
              partSize: 16MiB
            s3:
              secretAccessKey: very-secret
            http:
              address: 127.0.0.1:9090
            """.write(to: file, atomically: true, encoding: .utf8)
        let env = ["AWS_ACCESS_KEY_ID": "a", "FERRY_MAX_TRANSFERS": "6"]
        let out = try await runChecked(ferry, ["config", "check", "--config", file.path, "--part-concurrency", "3"], environment: env)
        func row(_ key: String) -> String { out.split(separator: "\n").first { $0.hasPrefix(key + " ") }.map(String.init) ?? "" }
        #expect(row("worker.maxTransfers").contains("6") && row("worker.maxTransfers").hasSuffix("[environment]"), "\(out)")
        #expect(row("worker.shutdownGrace").contains("12") && row("worker.shutdownGrace").hasSuffix("[file]"))
        #expect(row("transfers.partConcurrency").contains("3") && row("transfers.partConcurrency").hasSuffix("[flag]"))
        #expect(row("kafka.properties").contains("security.protocol=SASL_SSL"))
        #expect(row("s3.secretAccessKey").contains("<redacted>") && !out.contains("very-secret"))
        #expect(row("worker.stateDir").hasSuffix("[default]"))
        #expect(out.contains("configuration is valid"))
        // Which provider supplies the S3 keys, never the secret; the access rules in force.
        #expect(out.contains("S3 credentials: environment, access key a"), "\(out)")
        #expect(out.contains("access: guests guest=read+write+delete protected=read protectedOwn=none privateOwn=none"), "\(out)")
        let home = dir.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: home.appendingPathComponent(".aws"), withIntermediateDirectories: true)
        try "[ops]\naws_access_key_id = AKIAOPS\naws_secret_access_key = ops-secret\n"
            .write(to: home.appendingPathComponent(".aws/credentials"), atomically: true, encoding: .utf8)
        try "kafka: {bootstrapServers: 'k:9092'}\nworker: {dataRoot: \(dir.path)/data}\n".write(to: file, atomically: true, encoding: .utf8)
        let profiled = try await runChecked(ferry, ["config", "check", "--config", file.path, "--guest-permission", "guest=read"],
                                            environment: ["HOME": home.path, "AWS_PROFILE": "ops", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""])
        #expect(profiled.contains("S3 credentials: profile ops, access key AKIAOPS") && !profiled.contains("ops-secret"), "\(profiled)")
        #expect(profiled.contains("access: guests guest=read protected=read"), "\(profiled)")
        let noKeys = try await runCommand(ferry, ["config", "check", "--config", file.path],
                                          environment: ["HOME": home.path, "AWS_PROFILE": "nobody", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""])
        #expect(noKeys.status == 64 && noKeys.stderr.contains("profile 'nobody' has no credentials"), "\(noKeys.stderr)")
        try """
            kafka:
              bootstrapServers: kafka:9092
              properties: {security.protocol: SASL_SSL, sasl.mechanism: PLAIN}
            worker:
              dataRoot: \(dir.path)/data
              maxTransfers: 4
              shutdownGrace: 12
            transfers:
              partSize: 16MiB
            s3:
              secretAccessKey: very-secret
            http:
              address: 127.0.0.1:9090
            """.write(to: file, atomically: true, encoding: .utf8)
        // A flag beats the variable.
        let flagged = try await runChecked(ferry, ["config", "check", "--config", file.path, "--max-transfers", "7", "--format", "json"],
                                           environment: env)
        let json = try JSONSerialization.jsonObject(with: Data(flagged.utf8)) as? [String: [String: String]]
        #expect(json?["worker.maxTransfers"] == ["value": "7", "source": "flag"])

        // Unknown keys and bad values: exit 64 with the path.
        try "worker:\n  dataRoot: /tmp\n  maxTransfer: 4\n".write(to: file, atomically: true, encoding: .utf8)
        let unknown = try await runCommand(ferry, ["config", "check", "--config", file.path], environment: env)
        #expect(unknown.status == 64 && unknown.stderr.contains("unknown key 'worker.maxTransfer'"), "\(unknown.stderr)")
        try "worker:\n  dataRoot: /tmp\n  maxTransfers: many\n".write(to: file, atomically: true, encoding: .utf8)
        let notNumber = try await runCommand(ferry, ["config", "check", "--config", file.path], environment: ["AWS_ACCESS_KEY_ID": "a"])
        #expect(notNumber.status == 64 && notNumber.stderr.contains("worker.maxTransfers"), "\(notNumber.stderr)")
        // The configuration reference names every key the schema has.
        let readme = try String(contentsOf: TestPaths.repositoryRoot.appendingPathComponent("docs/operators/configuration.md"), encoding: .utf8)
        let keys = out.split(separator: "\n").compactMap { $0.split(separator: " ").first }.filter { $0.contains(".") && !$0.contains("/") }
        #expect(keys.count > 40)
        for key in keys { #expect(readme.contains("`\(key)`"), "docs/operators/configuration.md does not document \(key)") }
        let missing = try await runCommand(ferry, ["config", "check", "--config", dir.appendingPathComponent("none.yaml").path])
        #expect(missing.status == 64 && missing.stderr.contains("cannot read configuration file"))
    }
}

/// `ferry triggers list|test`: what is registered, and one handler run on an event file.
@Suite struct TriggersCommandTests {
    /// A declared Kafka target under `ferry triggers test` says what it would
    /// send, as transfers are printed, instead of failing for want of a producer.
    @Test func aKafkaTargetPrintsWhatItWouldSend() async throws {
        let dir = try TestPaths.temporaryDirectory("triggers-kafka-target")
        defer { try? FileManager.default.removeItem(at: dir) }
        let config = dir.appendingPathComponent("worker.yaml")
        try """
            triggers:
              - {name: forward, type: kafka, topic: analytics.objects, events: ["ObjectCreated:*"], prefix: public/}
            """.write(to: config, atomically: true, encoding: .utf8)
        let event = TestPaths.repositoryRoot.appendingPathComponent("triggers/events/s3-put.json").path
        let out = try await runChecked(TestPaths.ferryBinary, ["triggers", "test", "forward", "--event", event, "--config", config.path,
                                                               "--data-root", dir.path, "--output-dir", dir.appendingPathComponent("out").path])
        #expect(out.contains("forward succeeded"), "\(out)")
        #expect(out.contains("would send to analytics.objects key "), "\(out)")
    }

    @Test func listAndTestTheAuditHandler() async throws {
        let dir = try TestPaths.temporaryDirectory("triggers-cli")
        defer { try? FileManager.default.removeItem(at: dir) }
        let ferry = TestPaths.ferryBinary
        let list = try await runChecked(ferry, ["triggers", "list", "--data-root", dir.path])
        #expect(list.contains("audit-log\ts3:ObjectCreated:*,ObjectRemoved:*"))
        #expect(list.contains("object-index\tstream:objects NEW_IMAGE\t-\tbatchSize=100"))
        #expect(list.contains("checksum-manifest\tstream:objects NEW_IMAGE\t{\"eventName\":[\"INSERT\",\"MODIFY\"]"))
        let event = dir.appendingPathComponent("event.json")
        try Data(#"""
            {"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"us-east-1","eventTime":"2026-01-01T00:00:00.000Z",
            "eventName":"ObjectCreated:Put","userIdentity":{"principalId":"p"},"requestParameters":{"sourceIPAddress":"127.0.0.1"},
            "responseElements":{"x-amz-request-id":"r","x-amz-id-2":"i"},"s3":{"s3SchemaVersion":"1.0","configurationId":"c",
            "bucket":{"name":"photos","ownerIdentity":{"principalId":"o"},"arn":"arn:aws:s3:::photos"},
            "object":{"key":"public/a+b.jpg","size":3,"eTag":"e","sequencer":"01"}}}]}
            """#.utf8).write(to: event)
        let outputs = dir.appendingPathComponent("outputs")
        let out = try await runChecked(ferry, ["triggers", "test", "audit-log", "--event", event.path, "--data-root", dir.path,
                                               "--output-dir", outputs.path])
        #expect(out.contains("audit-log succeeded"))
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("audit").path), "the handler wrote into the data root")
        let audit = try String(contentsOf: outputs.appendingPathComponent("audit/audit.jsonl"), encoding: .utf8)
        #expect(audit.contains(#""key":"public/a b.jpg""#))

        let unknown = try await runCommand(ferry, ["triggers", "test", "nope", "--event", event.path, "--data-root", dir.path])
        #expect(unknown.status == 64 && unknown.stderr.contains("no handler named 'nope'"))
        try Data("{}".utf8).write(to: event)
        let bad = try await runCommand(ferry, ["triggers", "test", "audit-log", "--event", event.path, "--data-root", dir.path])
        #expect(bad.status == 64 && bad.stderr.contains("is not an S3 event"))
    }

    /// The sample events in triggers/events/ (captured from `ferry dev`; the
    /// help and the guide point authors to them) decode, pass the handler's
    /// filters and run a shipped handler each.
    @Test(arguments: [("audit-log", "s3-put"), ("audit-log", "s3-delete"), ("object-index", "objects-insert"),
                      ("object-index", "objects-remove"), ("post-feed", "posts-insert")])
    func shippedSampleEventsRunAHandler(handler: String, sample: String) async throws {
        let dir = try TestPaths.temporaryDirectory("triggers-samples")
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = TestPaths.repositoryRoot.appendingPathComponent("triggers/events/\(sample).json")
        let out = try await runChecked(TestPaths.ferryBinary, ["triggers", "test", handler, "--event", file.path, "--data-root", dir.path])
        #expect(out.contains("\(handler) succeeded") && out.contains("with 1 record(s)"), "\(out)")
        #expect(!out.contains("skipped"), "\(out)")
    }

    /// Invariant: `ferry triggers test` prints nothing a terminal acts on,
    /// whatever the event file holds. A handler's log line and its batch
    /// response repeat the event's ids and keys: the log went through
    /// swift-log's default handler (this command chose no log format) and the
    /// JSON left C1 and bidirectional overrides as they were.
    @Test func aHostileEventFileIsPrintedSafely() async throws {
        let dir = try TestPaths.temporaryDirectory("triggers-hostile")
        defer { try? FileManager.default.removeItem(at: dir) }
        let sample = try Data(contentsOf: TestPaths.repositoryRoot.appendingPathComponent("triggers/events/objects-insert.json"))
        let eventID = "id-\u{9B}31m-\u{202E}gpj.exe\u{1B}]0;x\u{7}"
        func inJSON(_ text: String) -> String { String(HostileInput.jsonString(text).dropFirst().dropLast()) }
        let text = String(decoding: sample, as: UTF8.self)
            .replacingOccurrences(of: "7e03193905f395223a59e3993fefe10e", with: inJSON(eventID))
            .replacingOccurrences(of: "public/photos/cat.jpg", with: inJSON("public/incoming/\u{1B}[2J\u{85}cat.jpg"))
        _ = try JSONSerialization.jsonObject(with: Data(text.utf8))  // still an event file
        let event = dir.appendingPathComponent("hostile.json")
        try Data(text.utf8).write(to: event)
        // checksum-manifest watches public/incoming/; with no object store here the record fails, by its id.
        let result = try await runCommand(TestPaths.ferryBinary, ["triggers", "test", "checksum-manifest", "--event", event.path, "--data-root", dir.path])
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        for (name, output) in [("stdout", result.stdout), ("stderr", result.stderr)] {
            #expect(!output.unicodeScalars.contains { $0 != "\n" && TerminalText.isUnsafe($0) }, "\(name): \(output.debugDescription)")
        }
        #expect(result.stderr.contains("checksum manifest for id-\\u{9B}31m-\\u{202E}gpj.exe\\u{1B}]0;x\\u{7} failed"), "\(result.stderr)")
        let response = try #require(result.stdout.split(separator: "\n").first { $0.hasPrefix("{") })
        let failures = try JSONDecoder().decode(StreamBatchResponse.self, from: Data(response.utf8))
        #expect(failures.batchItemFailures.map(\.itemIdentifier) == [eventID], "the JSON still reads back to the id: \(response)")
    }

    @Test func testAStreamHandlerAndListConfiguredTargets() async throws {
        let dir = try TestPaths.temporaryDirectory("triggers-cli-streams")
        defer { try? FileManager.default.removeItem(at: dir) }
        let ferry = TestPaths.ferryBinary
        let event = dir.appendingPathComponent("stream.json")
        try Data(#"""
            {"Records":[{"eventID":"c4ca4238a0b923820dcc509a6f75849b","eventName":"INSERT","eventVersion":"1.1","eventSource":"aws:dynamodb",
            "awsRegion":"us-east-1","dynamodb":{"ApproximateCreationDateTime":1428537600,"Keys":{"bucket":{"S":"photos"},"key":{"S":"public/a.jpg"}},
            "NewImage":{"bucket":{"S":"photos"},"key":{"S":"public/a.jpg"},"size":{"N":"3"},"owner":{"S":"alice"}},
            "SequenceNumber":"1000000000000000000070000","SizeBytes":40,"StreamViewType":"NEW_AND_OLD_IMAGES"},
            "eventSourceARN":"arn:aws:dynamodb:us-east-1:000000000000:table/objects/stream/ferry"},
            {"eventID":"other-table","eventName":"INSERT","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"us-east-1",
            "dynamodb":{"Keys":{"id":{"S":"t1"}},"SequenceNumber":"1000000000000000000070001","SizeBytes":4,"StreamViewType":"KEYS_ONLY"},
            "eventSourceARN":"arn:aws:dynamodb:us-east-1:000000000000:table/transfers/stream/ferry"}]}
            """#.utf8).write(to: event)
        let out = try await runChecked(ferry, ["triggers", "test", "object-index", "--event", event.path, "--data-root", dir.path,
                                               "--output-dir", dir.appendingPathComponent("outputs").path])
        #expect(out.contains("1 record(s) are from another table"))
        #expect(out.contains(#"{"batchItemFailures":[]}"#) && out.contains("object-index succeeded"))
        let row = try await runChecked("python3", ["-c", """
            import sqlite3, sys
            print(sqlite3.connect(sys.argv[1]).execute("SELECT bucket, key, size, owner FROM objects").fetchall())
            """, dir.appendingPathComponent("outputs/index/objects.sqlite").path])
        #expect(row.contains("('photos', 'public/a.jpg', 3, 'alice')"))

        let config = dir.appendingPathComponent("worker.yaml")
        try Data("""
            triggers:
              - {name: notify, type: webhook, url: "http://127.0.0.1:1/hook", events: ["ObjectRemoved:*"], prefix: public/}
              - {name: mirror, type: kafka, topic: mirror.objects, table: objects, viewType: KEYS_ONLY, batchSize: 500, startingPosition: LATEST,
                 retryDelaySeconds: 60}
            """.utf8).write(to: config)
        let list = try await runChecked(ferry, ["triggers", "list", "--config", config.path, "--data-root", dir.path])
        #expect(list.contains("notify\ts3:ObjectRemoved:*\tprefix=public/\tretries=2"))
        #expect(list.contains("mirror\tstream:objects KEYS_ONLY\t-\tbatchSize=500"))
        #expect(list.contains("start=LATEST") && list.contains("start=TRIM_HORIZON"), "\(list)")
        #expect(list.contains("retryDelay=60.0s") && list.contains("retryDelay=1.0s"), "\(list)")
        // The shipped catch-all audit log steps aside for the declared S3 target.
        #expect(list.contains("audit-log\tnot registered: overlaps 'notify'"))
        // Two declarations that overlap stop start-up with both names.
        try Data("""
            triggers:
              - {name: one, type: kafka, topic: t, events: ["ObjectCreated:*"], prefix: public/}
              - {name: two, type: kafka, topic: t, events: ["ObjectCreated:Put"], prefix: public/photos/}
            """.utf8).write(to: config)
        let clash = try await runCommand(ferry, ["triggers", "list", "--config", config.path, "--data-root", dir.path])
        #expect(clash.status != 0 && clash.stderr.contains("triggers 'one' and 'two' overlap"), "\(clash.stderr)")
        // `ferry config check` validates declarations as the worker would.
        try Data("triggers:\n  - {name: mail, type: email, events: [\"*\"]}\n".utf8).write(to: config)
        let check = try await runCommand(ferry, ["config", "check", "--config", config.path, "--data-root", dir.path,
                                                  "--bootstrap-servers", "127.0.0.1:9"],
                                         environment: ["AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"])
        #expect(check.status == 64 && check.stderr.contains("target 'mail': unknown type 'email'"), "\(check.stderr)")
    }
}

/// `ferry cp` draws a bar on a terminal and plain lines otherwise.
@Suite(.serialized) struct ProgressOutputTests {
    @Test func barOnATerminalPlainLinesOtherwise() async throws {
        let root = try TestPaths.temporaryDirectory("tty")
        defer { try? FileManager.default.removeItem(at: root) }
        try await MotoServer.start(logDirectory: root).stopAfter { moto in
            try await Boto3(moto)("create-bucket", "tty")
            let file = root.appendingPathComponent("f.bin")
            try Data(count: 20 << 20).write(to: file)
            let ferry = TestPaths.ferryBinary
            // script(1) runs the command on a pseudo-terminal.
            let tty = try await runChecked("script", ["-qec", "\(ferry) cp \(file.path) s3://tty/a.bin", "/dev/null"],
                                           environment: moto.clientEnvironment)
            #expect(tty.contains("\r"))
            #expect(tty.contains("[#") || tty.contains("[."))
            #expect(tty.contains("upload \(file.path) → s3://tty/a.bin: 20.0 MiB"))
            let piped = try await runChecked(ferry, ["cp", file.path, "s3://tty/b.bin"], environment: moto.clientEnvironment)
            #expect(!piped.contains("\r"))
            #expect(!piped.contains("[#"))
            #expect(piped.contains("upload \(file.path) → s3://tty/b.bin: 20.0 MiB"))
        }
    }

}
