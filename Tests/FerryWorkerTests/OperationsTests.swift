import FerryCore
import FerryTestSupport
import FerryTriggerKit
import FerryTriggers
@testable import FerryWorker
import Foundation
import Logging
import Metrics
import Prometheus
import Synchronization
import PropertyBased
import Testing

/// Configuration layering, the admin routes and JSON logs, without a network.
@Suite struct ConfigurationSourcesTests {
    let yaml = """
        kafka:
          bootstrapServers: kafka-1:9092,kafka-2:9092
          properties:
            security.protocol: SASL_SSL
            sasl.mechanism: SCRAM-SHA-512
        worker:
          dataRoot: /srv/ferry
          maxTransfers: 4
        sources:
          https: true
          hosts: [downloads.example.com, .cdn.example.com]
        s3:
          secretAccessKey: from-the-file
        """

    @Test func aYAMLFileFillsEverySchemaKind() throws {
        let sources = try ConfigurationSources(filePath: "worker.yaml", fileText: yaml, environment: [:])
        #expect(sources.value(.bootstrapServers)?.0 == "kafka-1:9092,kafka-2:9092")
        #expect(sources.value(.maxTransfers)! == ("4", .file))
        #expect(try sources.flag(.httpsSources)?.0 == true)
        #expect(sources.list(.httpsSourceHosts)?.0 == ["downloads.example.com", ".cdn.example.com"])
        #expect(sources.pairs(.kafkaProperties)?.0 == ["sasl.mechanism=SCRAM-SHA-512", "security.protocol=SASL_SSL"])
        #expect(sources.value(.stateDir) == nil)
    }

    @Test func theEnvironmentBeatsTheFile() throws {
        let env = ["FERRY_MAX_TRANSFERS": "6", "AWS_SECRET_ACCESS_KEY": "from-env", "FERRY_HTTPS_SOURCE_HOSTS": "a.example, b.example"]
        let sources = try ConfigurationSources(filePath: "worker.yaml", fileText: yaml, environment: env)
        #expect(sources.value(.maxTransfers)! == ("6", .environment))
        #expect(sources.value(.secretAccessKey)?.0 == "from-the-file", "an AWS SDK variable overrode the file")
        #expect(sources.list(.httpsSourceHosts)?.0 == ["a.example", "b.example"])
        #expect(sources.value(.dataRoot)! == ("/srv/ferry", .file))
    }

    /// Ferry's own variables beat the file; the AWS SDKs' variables, often set for
    /// other tools, only fill in what the file leaves out, for every setting that has one.
    @Test func awsVariablesFillInWhatTheFileLeavesOut() throws {
        for key in SettingKey.allCases {
            guard let own = key.environment.first(where: { $0.hasPrefix("FERRY_") }),
                  let aws = key.environment.first(where: { $0.hasPrefix("AWS_") }) else { continue }
            let section = key.rawValue.split(separator: ".")
            let yaml = "\(section[0]):\n  \(section[1]): from-the-file\n"
            let fileAndAWS = try ConfigurationSources(fileText: yaml, environment: [aws: "from-aws"])
            #expect(fileAndAWS.value(key)! == ("from-the-file", .file), "\(aws) overrode \(key.rawValue) from the file")
            let all = try ConfigurationSources(fileText: yaml, environment: [aws: "from-aws", own: "from-ferry"])
            #expect(all.value(key)! == ("from-ferry", .environment), "\(own) did not override the file")
            let awsOnly = try ConfigurationSources(fileText: "", environment: [aws: "from-aws"])
            #expect(awsOnly.value(key)! == ("from-aws", .environment), "\(aws) alone was not read for \(key.rawValue)")
        }
    }

    @Test func jsonIsAcceptedToo() throws {
        let json = #"{"worker": {"dataRoot": "/data", "shutdownGrace": 12.5}, "http": {"address": "0.0.0.0:9090"}}"#
        let sources = try ConfigurationSources(filePath: "worker.json", fileText: json, environment: [:])
        #expect(sources.value(.shutdownGrace)?.0 == "12.5")
        #expect(sources.value(.httpAddress)?.0 == "0.0.0.0:9090")
    }

    @Test(arguments: [
        ("kafka:\n  bootstrap: x\n", "unknown key 'kafka.bootstrap'"),
        ("kafkaa:\n  bootstrapServers: x\n", "unknown key 'kafkaa'"),
        ("worker:\n  dataRoot: [a, b]\n", "'worker.dataRoot' must be a single value"),
        ("kafka:\n  properties: [a]\n", "'kafka.properties' must be a mapping"),
        ("- just\n- a list\n", "top level must be a mapping"),
        ("worker: {dataRoot: \"/x\"\n", "not valid YAML or JSON"),
    ])
    func badFilesAreRefusedWithThePath(text: String, expected: String) {
        #expect {
            _ = try ConfigurationSources(filePath: "bad.yaml", fileText: text, environment: [:])
        } throws: { error in
            "\(error)".contains(expected) && "\(error)".contains("bad.yaml")
        }
    }

    @Test func triggersDeclaredInTheFileBecomeTargets() throws {
        let text = yaml + """

            triggers:
              - name: notify
                type: webhook
                url: http://hooks.example/ferry
                events: ["ObjectCreated:*"]
                prefix: public/
                maximumRetryAttempts: 1
              - name: big-objects
                type: kafka
                topic: analytics.objects
                table: objects
                viewType: NEW_IMAGE
                batchSize: 50
                filters:
                  - {dynamodb: {NewImage: {size: {N: [{numeric: [">", 1000000]}]}}}}
            """
        let sources = try ConfigurationSources(filePath: "worker.yaml", fileText: text, environment: [:])
        #expect(sources.targets.map(\.name) == ["notify", "big-objects"])
        var registry = TriggerRegistry()
        for target in sources.targets { try target.register(into: &registry, http: TestHTTP.transport) }
        #expect(registry.s3Triggers.first?.prefix == "public/")
        #expect(registry.s3Triggers.first?.delivery.maximumRetryAttempts == 1)
        let stream = try #require(registry.streamTriggers.first)
        #expect(stream.viewType == .newImage && stream.mapping.batchSize == 50)
        #expect(stream.mapping.filterCriteria.sources == [#"{"dynamodb":{"NewImage":{"size":{"N":[{"numeric":[">",1000000]}]}}}}"#])
        // The rest of the file is read as before.
        #expect(sources.value(.maxTransfers)?.0 == "4")
    }

    @Test(arguments: [
        ("triggers:\n  - {name: a, type: webhook, url: http://x, events: [\"*\"], retries: 2}\n", "unknown key 'triggers[0].retries'"),
        ("triggers: {name: a}\n", "'triggers' must be a list"),
    ])
    func badTriggerDeclarationsNameTheEntry(text: String, expected: String) {
        #expect {
            _ = try ConfigurationSources(filePath: "bad.yaml", fileText: text, environment: [:])
        } throws: { error in
            "\(error)".contains(expected)
        }
    }

    @Test(arguments: [
        (TargetDeclaration(name: "a", type: "email", events: ["*"]), "unknown type 'email'"),
        (TargetDeclaration(name: "a", type: "webhook", events: ["*"]), "needs an http(s) url"),
        (TargetDeclaration(name: "a", type: "kafka", topic: "t"), "either 'events'"),
        (TargetDeclaration(name: "a", type: "kafka", topic: "t", table: "objects", viewType: "ALL"), "unknown viewType 'ALL'"),
        (TargetDeclaration(name: "a", type: "kafka", topic: "t", table: "no/such"), "no stream for table 'no/such'"),
    ])
    func targetsThatCannotWorkAreRefused(target: TargetDeclaration, expected: String) {
        var registry = TriggerRegistry()
        #expect { try target.register(into: &registry, http: TestHTTP.transport) } throws: { "\($0)".contains(expected) }
    }

    @Test func everySettingHasAFlagAndAFerryVariable() {
        for key in SettingKey.allCases {
            #expect(key.flag.hasPrefix("--"), "\(key)")
            #expect(key.environment.first?.hasPrefix("FERRY_") == true, "\(key)")
        }
        #expect(SettingKey.authMode.flag == "--auth-mode")
        #expect(SettingKey.maxTransfers.environment == ["FERRY_MAX_TRANSFERS"])
        #expect(SettingKey.region.environment == ["FERRY_REGION", "AWS_REGION", "AWS_DEFAULT_REGION"])
    }
}

@Suite struct AdminRouterTests {
    static let token = "admin-token-0123456789"
    let bearer = "Bearer \(AdminRouterTests.token)"

    func router(health: WorkerHealth = WorkerHealth(), inFlight: InFlightTransfers = InFlightTransfers(),
                token: String? = AdminRouterTests.token) -> AdminRouter {
        AdminRouter(workerId: "w-1", health: health, metrics: PrometheusCollectorRegistry(), inFlight: inFlight, engine: nil, state: nil,
                    adminToken: token)
    }

    func body(_ r: AdminRouter.Response) -> String { String(decoding: r.body, as: UTF8.self) }

    @Test func healthAndReadiness() async {
        let health = WorkerHealth()
        let r = router(health: health)
        #expect(await r.respond(method: "GET", path: "/healthz").status == 200)
        let notYet = await r.respond(method: "GET", path: "/readyz")
        #expect(notYet.status == 503)
        #expect(body(notYet).contains("not yet in the consumer group"))
        health.joinedGroup()
        health.storage(reachable: true)
        health.outbox(depth: 0, delivered: true)
        let ready = await r.respond(method: "GET", path: "/readyz")
        #expect(ready.status == 200, "\(body(ready))")
        // An outbox that stopped draining makes the worker unready.
        health.outbox(depth: 12, delivered: false)
        #expect(health.report(now: Date().addingTimeInterval(60)).ready == false)
        health.storage(reachable: false, error: "connection refused")
        #expect(body(await r.respond(method: "GET", path: "/readyz")).contains("connection refused"))
    }

    @Test func transfersAndRouteErrors() async {
        let inFlight = InFlightTransfers()
        inFlight.add(.init(id: "t-1", op: "upload", bucket: "b", key: "public/k", partition: 2, offset: 9,
                           startedAt: "2026-11-21T00:00:00.000Z", state: .running, bytesTransferred: 5, totalBytes: 10))
        let r = router(inFlight: inFlight)
        let list = await r.respond(method: "GET", path: "/transfers", authorization: bearer)
        #expect(list.status == 200)
        #expect(body(list).contains(#""id":"t-1""#) && body(list).contains(#""partition":2"#))
        #expect(await r.respond(method: "GET", path: "/transfers/t-1", authorization: bearer).status == 200)
        #expect(await r.respond(method: "GET", path: "/transfers/nope", authorization: bearer).status == 404)
        #expect(await r.respond(method: "POST", path: "/transfers/t-1/pause", authorization: bearer).status == 404,
                "no engine: not running here")
        #expect(await r.respond(method: "DELETE", path: "/metrics").status == 405)
        #expect(await r.respond(method: "GET", path: "/nowhere").status == 404)
    }

    /// Every /transfers route, every method: without the right token nothing
    /// is shown; without a configured token the routes are off. Probes stay open.
    @Test func transferRoutesNeedTheAdminToken() async {
        let inFlight = InFlightTransfers()
        inFlight.add(.init(id: "t-1", op: "upload", bucket: "b", key: "private/alice/secret.txt", partition: 0, offset: 1,
                           startedAt: "2026-11-21T00:00:00.000Z", state: .running, bytesTransferred: 0, totalBytes: 10))
        let routes = [("GET", "/transfers"), ("GET", "/transfers/t-1"), ("POST", "/transfers/t-1/pause"),
                      ("POST", "/transfers/t-1/cancel"), ("GET", "/transfers?x=1"), ("DELETE", "/transfers/t-1")]
        let wrong: [String?] = [nil, "", "Bearer", "Bearer ", "Basic \(AdminRouterTests.token)", "Bearer \(AdminRouterTests.token)x",
                                "Bearer \(AdminRouterTests.token.dropLast())", "Bearer admin-token-0123456788", AdminRouterTests.token]
        let r = router(inFlight: inFlight)
        for (method, path) in routes {
            for authorization in wrong {
                let response = await r.respond(method: method, path: path, authorization: authorization)
                #expect(response.status == 401, "\(method) \(path) with \(authorization ?? "nothing")")
                #expect(!body(response).contains("secret.txt"))
                #expect(response.headers["www-authenticate"]?.hasPrefix("Bearer") == true)
            }
            let off = await router(inFlight: inFlight, token: nil).respond(method: method, path: path, authorization: bearer)
            #expect(off.status == 403 && body(off).contains("--admin-token-file"), "\(method) \(path)")
        }
        // The scheme is case-insensitive, as RFC 7235 has it.
        #expect(await r.respond(method: "GET", path: "/transfers", authorization: "bearer \(AdminRouterTests.token)").status == 200)
        for path in ["/healthz", "/metrics"] {
            #expect(await router(token: nil).respond(method: "GET", path: path).status == 200, "\(path) stays open")
        }
    }

    @Test func metricsAreInPrometheusTextFormat() async {
        let registry = PrometheusCollectorRegistry()
        registry.makeCounter(descriptor: MetricNameDescriptor(metricName: "ferry_transfers", unitName: "total", helpText: ""), labels: [("op", "upload"), ("outcome", "completed")]).increment(by: Int64(3))
        let r = AdminRouter(workerId: "w", health: WorkerHealth(), metrics: registry, inFlight: nil, engine: nil, state: nil)
        let response = await r.respond(method: "GET", path: "/metrics")
        #expect(response.contentType.hasPrefix("text/plain; version=0.0.4"))
        #expect(body(response).contains(#"ferry_transfers_total{op="upload",outcome="completed"} 3"#), "\(body(response))")
    }
}

@Suite struct JSONLogHandlerTests {
    @Test func metadataBecomesTopLevelFields() throws {
        let lines = Mutex<[String]>([])
        var handler = JSONLogHandler(label: "ferry.worker") { line in lines.withLock { $0.append(line) } }
        handler[metadataKey: "partition"] = "3"
        let logger = Logger(label: "ferry.worker") { _ in handler }
        logger.info("upload accepted", metadata: ["transfer": "t-9", "offset": "41"])
        let line = try #require(lines.withLock { $0.first })
        #expect(line.hasSuffix("\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        #expect(object["message"] == "upload accepted")
        #expect(object["level"] == "info")
        #expect(object["transfer"] == "t-9" && object["partition"] == "3" && object["offset"] == "41")
        // ISO 8601 with milliseconds in UTC, as statuses and events write it, and now.
        let time = try #require(object["time"].flatMap(Timestamp.parse), "\(line)")
        #expect(object["time"]?.count == 24 && abs(time.timeIntervalSinceNow) < 60, "\(line)")
    }

    /// Invariant: a log line holds nothing a terminal acts on, and reads back
    /// to what was logged. Messages and metadata repeat others' words (keys,
    /// event ids, a store's error); JSONEncoder left C1 and bidirectional
    /// overrides as they were.
    @Test func hostileWordsAreEscapedAndReadBack() async throws {
        let lines = Mutex<[String]>([])
        let handler = JSONLogHandler(label: "ferry.worker") { line in lines.withLock { $0.append(line) } }
        let logger = Logger(label: "ferry.worker") { _ in handler }
        await propertyCheck(count: 300, input: HostileInput.keys) { key in
            lines.withLock { $0 = [] }
            logger.error("checksum manifest for \(key) failed", metadata: ["key": "\(key)"])
            guard let line = lines.withLock({ $0.first }) else { Issue.record("no line for \(key.debugDescription)"); return }
            #expect(!line.dropLast().unicodeScalars.contains(where: TerminalText.isUnsafe), "\(key.debugDescription): \(line)")
            // JSONDecoder: JSONSerialization drops a U+FEFF that starts a string.
            let object = try? JSONDecoder().decode([String: String].self, from: Data(line.utf8))
            #expect(object?["key"] == key && object?["message"] == "checksum manifest for \(key) failed", "\(key.debugDescription): \(line)")
        }
    }
}
