import Foundation

/// kcat, a Kafka client no one here wrote, for producing and reading test traffic.
public struct Kcat: Sendable {
    public let bootstrapServers: String
    /// Added to kcat's environment (a broker that needs another librdkafka: `TansuBroker`).
    public let environment: [String: String]

    public init(bootstrapServers: String, environment: [String: String] = [:]) {
        self.bootstrapServers = bootstrapServers
        self.environment = environment
    }

    /// Produces one message (the value may contain newlines: it is sent whole),
    /// to `partition` or where the key's hash puts it.
    public func produce(topic: String, key: String?, value: String, partition: Int? = nil) async throws {
        var args = ["-P", "-b", bootstrapServers, "-t", topic, "-D", "\u{1}"]
        if let key { args += ["-k", key] }
        if let partition { args += ["-p", "\(partition)"] }
        try await runChecked("kcat", args, environment: environment, input: Data(value.utf8))
    }

    /// Produces many single-line messages with one kcat process, in order.
    public func produceMany(topic: String, _ messages: [(key: String, value: String)]) async throws {
        let input = messages.map { "\($0.key)\t\($0.value)" }.joined(separator: "\n") + "\n"
        try await runChecked("kcat", ["-P", "-b", bootstrapServers, "-t", topic, "-K", "\t"], environment: environment,
                             input: Data(input.utf8))
    }

    public struct Record: Sendable {
        public var key: String
        public var value: String
        public var headers: String
        public var partition: Int
        public var offset: Int64
    }

    /// Every message of `topic` now (reads to the end of each partition).
    public func consumeAll(topic: String) async throws -> [Record] {
        let separator = "\u{1E}"
        let field = "\u{1F}"
        let format = "%k\(field)%s\(field)%h\(field)%p\(field)%o\(separator)"
        let result = try await runCommand("kcat", ["-C", "-b", bootstrapServers, "-t", topic, "-o", "beginning", "-e",
                                                   "-q", "-f", format], environment: environment, timeout: 60)
        guard result.status == 0 else {
            if result.stderr.contains("Unknown topic") { return [] }
            throw CommandFailed(description: "kcat -C \(topic): \(result.stderr)")
        }
        return result.stdout.components(separatedBy: separator).compactMap { entry in
            let parts = entry.components(separatedBy: field)
            guard parts.count == 5 else { return nil }
            return Record(key: parts[0], value: parts[1], headers: parts[2], partition: Int(parts[3]) ?? -1,
                          offset: Int64(parts[4]) ?? -1)
        }
    }
}
