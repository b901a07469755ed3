import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// compose/ parses as a Compose file (Debian's docker-compose needs no engine
/// for `config`) and describes the fleet the README promises.
@Suite struct ComposeTests {
    let file = TestPaths.repositoryRoot.appendingPathComponent("compose/docker-compose.yml").path

    @Test func composeFileIsValidAndDescribesTheFleet() async throws {
        let services = try await runChecked("docker-compose", ["-f", file, "config", "--services"])
        #expect(Set(services.split(separator: "\n").map(String.init)) == ["kafka", "topics", "minio", "buckets", "ferry-worker"])
        let rendered = try await runChecked("docker-compose", ["-f", file, "config"])
        #expect(rendered.contains("replicas: 3"))
        #expect(rendered.contains("KAFKA_PROCESS_ROLES: broker,controller"))   // KRaft, no ZooKeeper
        #expect(rendered.contains("FERRY_BOOTSTRAP_SERVERS: kafka:9092"))
        #expect(rendered.contains("AWS_ENDPOINT_URL: http://minio:9000"))
        #expect(rendered.contains("service_completed_successfully"))
        #expect(rendered.contains("FERRY_CONFIG: /etc/ferry/worker.yaml"))
        #expect(rendered.contains("http://127.0.0.1:9090/readyz"))
        // The broker creates no topic by accident: the `topics` service must create every one Ferry uses.
        #expect(rendered.contains("KAFKA_AUTO_CREATE_TOPICS_ENABLE: \"false\""))
        let created = Set(rendered.split(whereSeparator: { " \\\n;".contains($0) })
            .filter { $0.hasPrefix("ferry.") && $0.contains(":") }.map { String($0.prefix { $0 != ":" }) })
        for topic in Topics().all {
            #expect(created.contains(topic), "compose does not create \(topic) (it creates \(created.sorted()))")
        }
    }

    @Test func dockerfileBuildsReleaseAndRunsAsNonRoot() throws {
        let dockerfile = try String(contentsOfFile: TestPaths.repositoryRoot.appendingPathComponent("compose/Dockerfile").path, encoding: .utf8)
        #expect(dockerfile.contains("FROM swift:6"))
        #expect(dockerfile.contains("swift build -c release"))
        #expect(dockerfile.contains("USER ferry"))
        for package in ["librdkafka-dev", "libcurl4-openssl-dev", "libssl-dev", "libsqlite3-dev"] {
            #expect(dockerfile.contains(package))
        }
        let ignore = try String(contentsOfFile: TestPaths.repositoryRoot.appendingPathComponent(".dockerignore").path, encoding: .utf8)
        #expect(ignore.contains(".build"))
    }

    /// The workers' configuration file is one `ferry config check` accepts
    /// (its data root overridden: /data exists only in the container).
    @Test func workerConfigurationFileIsValid() async throws {
        let config = TestPaths.repositoryRoot.appendingPathComponent("compose/worker.yaml").path
        let out = try await runChecked(TestPaths.ferryBinary, ["config", "check", "--config", config, "--data-root", "/tmp",
                                                               "--bootstrap-servers", "kafka:9092"],
                                       environment: ["AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"])
        #expect(out.contains("configuration is valid"))
        #expect(out.contains("http.address") && out.contains("0.0.0.0:9090"))
    }
}
