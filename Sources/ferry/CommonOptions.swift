import ArgumentParser
import FerryCore
import FerryKafka
import FerryS3
import Foundation
import Logging

/// Reads the first set, non-empty environment variable of `names`.
func environment(_ names: String...) -> String? {
    let env = ProcessInfo.processInfo.environment
    for name in names { if let value = env[name], !value.isEmpty { return value } }
    return nil
}

struct KafkaOptions: ParsableArguments {
    @Option(name: .customLong("bootstrap-servers"), help: "Kafka brokers, HOST:PORT[,…] (env FERRY_BOOTSTRAP_SERVERS).")
    var bootstrapServers: String?

    @Option(name: .customLong("topic-prefix"), help: "Prefix of Ferry's topics (env FERRY_TOPIC_PREFIX; default ferry).")
    var topicPrefix: String?

    @Option(name: .customLong("kafka-property"), parsing: .singleValue,
            help: "A librdkafka property NAME=VALUE, e.g. security.protocol=SASL_SSL (repeatable).")
    var kafkaProperties: [String] = []

    var topics: Topics { Topics(prefix: topicPrefix ?? environment("FERRY_TOPIC_PREFIX") ?? "ferry") }

    func configuration() throws -> KafkaConfiguration {
        guard let servers = bootstrapServers ?? environment("FERRY_BOOTSTRAP_SERVERS") else {
            throw ValidationError("no Kafka brokers: pass --bootstrap-servers or set FERRY_BOOTSTRAP_SERVERS")
        }
        return KafkaConfiguration(bootstrapServers: servers, try properties())
    }

    func properties() throws -> [String: String] {
        var result: [String: String] = [:]
        for pair in kafkaProperties {
            guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
                throw ValidationError("--kafka-property wants NAME=VALUE, got '\(pair)'")
            }
            result[String(pair[..<eq])] = String(pair[pair.index(after: eq)...])
        }
        return result
    }
}

struct S3Options: ParsableArguments {
    @Option(name: .customLong("s3-endpoint"), help: "S3 endpoint URL (env AWS_ENDPOINT_URL; default AWS for the region).")
    var endpoint: String?

    @Option(help: "Region for signing (env AWS_REGION or AWS_DEFAULT_REGION; default us-east-1).")
    var region: String?

    @Option(name: .customLong("addressing-style"), help: "path or virtual (default: path for a custom endpoint, virtual for AWS).")
    var addressingStyle: String?

    @Option(name: .customLong("access-key-id"), help: "Access key id (env AWS_ACCESS_KEY_ID).")
    var accessKeyId: String?

    @Option(name: .customLong("secret-access-key"), help: "Secret key (env AWS_SECRET_ACCESS_KEY; prefer the variable: flags show in ps).")
    var secretAccessKey: String?

    @Option(name: .customLong("session-token"), help: "Session token (env AWS_SESSION_TOKEN).")
    var sessionToken: String?

    @Option(name: .customLong("ca-bundle"), help: "PEM file of CAs to trust for HTTPS (env AWS_CA_BUNDLE).")
    var caBundle: String?

    var resolvedRegion: String { region ?? environment("AWS_REGION", "AWS_DEFAULT_REGION") ?? "us-east-1" }

    func configuration() throws -> S3Client.Configuration {
        let region = resolvedRegion
        var endpoint: S3Endpoint
        if let url = self.endpoint ?? environment("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL") {
            endpoint = try S3Endpoint(url: url, style: .path)
        } else {
            endpoint = .aws(region: region)
        }
        if let style = addressingStyle {
            guard let parsed = S3Endpoint.AddressingStyle(rawValue: style) else {
                throw ValidationError("--addressing-style must be path or virtual")
            }
            endpoint.style = parsed
        }
        let fromEnv = AWSCredentials.fromEnvironment()
        guard let id = accessKeyId ?? fromEnv?.accessKeyId, let secret = secretAccessKey ?? fromEnv?.secretAccessKey else {
            throw ValidationError("no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or pass --access-key-id/--secret-access-key)")
        }
        let credentials = AWSCredentials(accessKeyId: id, secretAccessKey: secret,
                                         sessionToken: sessionToken ?? fromEnv?.sessionToken)
        return S3Client.Configuration(endpoint: endpoint, region: region, credentials: credentials,
                                      caBundle: caBundle ?? environment("AWS_CA_BUNDLE"))
    }
}

struct LogOptions: ParsableArguments {
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical (env FERRY_LOG_LEVEL; default info).")
    var level: String?

    /// Sets up swift-log for the process and returns the root logger.
    func bootstrap(label: String) throws -> Logger {
        let text = level ?? environment("FERRY_LOG_LEVEL") ?? "info"
        guard let level = Logger.Level(rawValue: text) else { throw ValidationError("unknown log level '\(text)'") }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        return Logger(label: label)
    }
}
