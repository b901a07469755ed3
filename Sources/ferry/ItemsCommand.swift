import ArgumentParser
import FerryClient
import FerryCore
import Foundation
import Logging

/// `ferry items …`: write and read record tables (docs/producers/records.md).
struct ItemsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "items",
        abstract: "Write items of record tables (with the files they carry) and read them back.",
        discussion: """
            Writes are requests like transfers: put, update and delete print the request id and, with --wait,
            follow it to its terminal status. Reads build a view from the table's topic (<prefix>.tables.<name>).

            Examples:
              ferry items put --table posts:id --item '{"id":"p1","title":"Hi","picture":{"bucket":"demo","key":"pics/p1.jpg","localUri":"/srv/ferry/p1.jpg","mimeType":"image/jpeg"}}' --wait
              ferry items update --table posts:id --key '{"id":"p1"}' --set '{"title":"Hello"}' --remove draft --wait
              ferry items get --table posts --key p1
              ferry items query --table comments --key p1 --sort-prefix 2026-
              ferry items download --table posts --key p1 --attribute picture --to /srv/ferry/out/p1.jpg
              ferry items delete --table posts:id --key '{"id":"p1"}' --wait
            Exit codes: 0 done; 1 the request ended failed or rejected, or no such item; 3 --timeout passed; 64 bad usage.
            """,
        subcommands: [Put.self, Update.self, Delete.self, Get.self, Query.self, Download.self])

    struct WriteOptions: ParsableArguments {
        @Option(help: "The table: NAME (its keys read from the items it holds) or NAME:PARTITION_KEY[/SORT_KEY].") var table: String
        @Option(help: "Request id (idempotency key; default a new UUID).") var id: String?
        @Option(name: .customLong("access-level"), help: "Level of the files the item carries: guest, protected or private.") var accessLevel: String?
        @Option(name: .customLong("identity-id"), help: "Who acts (the item's owner when it creates it).") var identityId: String?
        @Option(help: "Identity proof for workers with --auth-mode jwt (env FERRY_AUTH_TOKEN).") var auth: String?
        @Flag(help: "Wait for the request's terminal status.") var wait = false
        @Option(help: "With --wait: give up after this many seconds (default 600).") var timeout: Double = 600

        func validate() throws { try requireRange(timeout, waitSeconds, "--timeout") }

        /// The table's keys: as given (`NAME:KEYS`), or learned from the items the table holds, as reads learn them.
        func definition(_ client: ItemClient) async throws -> TableDefinition {
            if table.contains(":") { return try configured { try TableDefinition(parsing: table) } }
            if let problem = TableDefinition.nameProblem(table) { throw ValidationError(problem.message) }
            guard let learned = try await client.definition(of: table) else {
                throw ValidationError("table '\(table)' holds no items yet, so its keys are not known here: name them, "
                                      + "--table \(table):PARTITION_KEY[/SORT_KEY]")
            }
            return learned
        }
        var requestId: String { id ?? UUID().uuidString.lowercased() }
        var authToken: String? { auth ?? environment("FERRY_AUTH_TOKEN") }
        func level() throws -> AccessLevel? {
            guard let accessLevel else { return nil }
            guard let level = AccessLevel(rawValue: accessLevel) else { throw ValidationError("--access-level must be guest, protected or private") }
            return level
        }
    }

    struct ReadOptions: ParsableArguments {
        @Option(help: "The table's name (NAME or NAME:KEYS).") var table: String
        @Option(help: "The partition key's value.") var key: String
        var name: String { String(table.split(separator: ":").first ?? "") }
    }

    static func client(_ kafka: KafkaOptions, _ log: LogOptions) throws -> ItemClient {
        try client(kafka, logger: try log.bootstrap(label: "ferry.items"))
    }

    static func client(_ kafka: KafkaOptions, logger: Logger) throws -> ItemClient {
        let configuration = try kafka.configuration()
        return try ItemClient(bootstrapServers: configuration.properties["bootstrap.servers"]!, properties: try kafka.properties(),
                              topics: kafka.topics, deliveryTimeout: KafkaOptions.commandDeliveryTimeout, logger: logger)
    }

    static func attributes(_ json: String, option: String) throws -> AttributeMap {
        let bytes = Array(json.utf8)
        // Held to what the worker takes: a name given twice is refused there too.
        if let problem = StrictJSON.check(bytes) { throw ValidationError(problem.refusing(option)) }
        let first = bytes.drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D || $0 == 0xEF || $0 == 0xBB || $0 == 0xBF }.first
        guard first == UInt8(ascii: "{") else {
            throw ValidationError("\(option) must be a JSON object ({…}), got \(first == UInt8(ascii: "[") ? "an array" : "a single value")")
        }
        // Read from the text, as the worker reads it: numbers keep every digit.
        return try configured { try ItemJSONText.map(json, field: option) }
    }

    static func finish(_ id: String, client: ItemClient, write: WriteOptions) async throws {
        print(id)
        guard write.wait else { return }
        flushStandardOutput()  // the id now, not when the wait ends
        let status: TransferStatus
        do {
            status = try await client.result(of: id, timeout: write.timeout)
        } catch TransferClientError.timedOut {
            printError("timed out after \(write.timeout.clampedInt()) s waiting for \(id)")
            throw ExitCode(FerryExit.timedOut)
        }
        let shown = status.visible
        print("\(shown.state.rawValue)\(shown.error.map { ": \($0.code) \($0.message)" } ?? "")")
        if status.state != .completed { throw ExitCode(FerryExit.transferNotCompleted) }
    }

    static func printJSON(_ record: ItemRecord) {
        let rest: [String: Any] = ["table": record.table, "version": record.version, "owner": record.owner ?? NSNull(),
                                   "updatedAt": record.updatedAt]
        let data = (try? JSONSerialization.data(withJSONObject: rest, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        // The item first (keys stay sorted), written as the worker keeps it: numbers with every digit.
        let item = (try? ItemJSONText.text(record.item, field: "item", shown: true)) ?? "null"
        print(TerminalText.visibleJSON("{\"item\":\(item),\(String(decoding: data.dropFirst(), as: UTF8.self))"))
    }

    struct Put: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Write a whole item; its S3ObjectInput attributes are uploaded first.")
        @OptionGroup var kafka: KafkaOptions
        @OptionGroup var log: LogOptions
        @OptionGroup var write: WriteOptions
        @Option(help: "The item, plain JSON.") var item: String

        func run() async throws {
            // Bad input is refused before Kafka is touched.
            let attributes = try ItemsCommand.attributes(item, option: "--item")
            let client = try ItemsCommand.client(kafka, log)
            let id = try await client.putItem(attributes, into: try await write.definition(client),
                                              id: write.requestId, accessLevel: try write.level(),
                                              identityId: write.identityId, auth: write.authToken)
            try await ItemsCommand.finish(id, client: client, write: write)
        }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Set and remove attributes of an item (created when missing).")
        @OptionGroup var kafka: KafkaOptions
        @OptionGroup var log: LogOptions
        @OptionGroup var write: WriteOptions
        @Option(help: "The key attributes, JSON.") var key: String
        @Option(help: "Attributes to set, JSON (S3ObjectInputs are uploaded).") var set: String?
        @Option(parsing: .singleValue, help: "An attribute to remove (repeatable).") var remove: [String] = []

        func run() async throws {
            let keyAttributes = try ItemsCommand.attributes(key, option: "--key")
            let setAttributes = try set.map { try ItemsCommand.attributes($0, option: "--set") } ?? [:]
            let client = try ItemsCommand.client(kafka, log)
            let id = try await client.updateItem(key: keyAttributes, in: try await write.definition(client), set: setAttributes, remove: remove,
                                                 id: write.requestId, accessLevel: try write.level(),
                                                 identityId: write.identityId, auth: write.authToken)
            try await ItemsCommand.finish(id, client: client, write: write)
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete an item.")
        @OptionGroup var kafka: KafkaOptions
        @OptionGroup var log: LogOptions
        @OptionGroup var write: WriteOptions
        @Option(help: "The key attributes, JSON.") var key: String

        func run() async throws {
            let keyAttributes = try ItemsCommand.attributes(key, option: "--key")
            let client = try ItemsCommand.client(kafka, log)
            let id = try await client.deleteItem(key: keyAttributes, from: try await write.definition(client),
                                                 id: write.requestId, accessLevel: try write.level(),
                                                 identityId: write.identityId, auth: write.authToken)
            try await ItemsCommand.finish(id, client: client, write: write)
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print one item as JSON (exit 1 when there is none).")
        @OptionGroup var kafka: KafkaOptions
        @OptionGroup var log: LogOptions
        @OptionGroup var read: ReadOptions
        @Option(name: .customLong("sort-key"), help: "The sort key's value, for tables with one.") var sortKey: String?

        func run() async throws {
            guard let record = try await ItemsCommand.client(kafka, log).get(table: read.name, partitionKey: read.key, sortKey: sortKey) else {
                printError("no item \(read.key) in table \(read.name)")
                throw ExitCode(FerryExit.transferNotCompleted)
            }
            ItemsCommand.printJSON(record)
        }
    }

    struct Query: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the items of one partition key in sort-key order, one JSON line each.")
        @OptionGroup var kafka: KafkaOptions
        @OptionGroup var log: LogOptions
        @OptionGroup var read: ReadOptions
        @Option(name: .customLong("sort-prefix"), help: "Only sort keys starting with this.") var sortPrefix: String?
        @Option(help: "Sort keys from this (inclusive; numbers compare as numbers).") var from: String?
        @Option(help: "Sort keys up to this (inclusive).") var to: String?
        @Option(help: "At most this many items (default 1000).") var limit = 1000

        func run() async throws {
            let query = ItemQuery(table: read.name, partitionKey: read.key, sortKeyPrefix: sortPrefix, from: from, to: to, limit: limit)
            for record in try await ItemsCommand.client(kafka, log).query(query) { ItemsCommand.printJSON(record) }
        }
    }

    struct Download: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Download the file an item's attribute references, through the workers (access rules apply).")
        @OptionGroup var kafka: KafkaOptions
        @OptionGroup var log: LogOptions
        @OptionGroup var read: ReadOptions
        @Option(name: .customLong("sort-key"), help: "The sort key's value, for tables with one.") var sortKey: String?
        @Option(help: "The attribute holding the S3Object: a name, or a path such as pictures[1].") var attribute: String
        @Option(help: "Where to write the file: a path or file:///… under the workers' data root.") var to: String
        @Option(name: .customLong("identity-id"), help: "Who acts.") var identityId: String?
        @Option(help: "Identity proof for workers with --auth-mode jwt (env FERRY_AUTH_TOKEN).") var auth: String?
        @Option(help: "Give up after this many seconds (default 600).") var timeout: Double = 600

        func validate() throws { try requireRange(timeout, waitSeconds, "--timeout") }

        func run() async throws {
            let client = try ItemsCommand.client(kafka, log)
            let status: TransferStatus
            do {
                status = try await client.download(table: read.name, partitionKey: read.key, sortKey: sortKey, attribute: try Self.path(attribute),
                                                   to: EnqueueCommand.uri(to), identityId: identityId,
                                                   auth: auth ?? environment("FERRY_AUTH_TOKEN"), timeout: timeout)
            } catch TransferClientError.invalidRequest(let error) {
                throw ValidationError(error.message)
            }
            let shown = status.visible
            print("\(shown.state.rawValue) \(shown.object.map { "s3://\($0.bucket)/\($0.key)" } ?? "") -> \(TerminalText.visible(to))\(shown.error.map { ": \($0.code) \($0.message)" } ?? "")")
            if status.state != .completed { throw ExitCode(FerryExit.transferNotCompleted) }
        }

        /// `name`, `name.inner`, `name[2]`.
        static func path(_ text: String) throws -> [FileInput.PathElement] {
            var path: [FileInput.PathElement] = []
            for part in text.split(separator: ".") {
                var name = Substring(part)
                var indexes: [Int] = []
                while name.hasSuffix("]"), let open = name.lastIndex(of: "[") {
                    guard let index = Int(name[name.index(after: open)..<name.index(before: name.endIndex)]) else {
                        throw ValidationError("--attribute: bad index in \(text)")
                    }
                    indexes.insert(index, at: 0)
                    name = name[..<open]
                }
                if !name.isEmpty { path.append(.attribute(String(name))) }
                path += indexes.map(FileInput.PathElement.index)
            }
            guard !path.isEmpty else { throw ValidationError("--attribute is empty") }
            return path
        }
    }
}
