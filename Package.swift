// swift-tools-version:6.1
import PackageDescription

/// Ferry: a Kafka-fed worker fleet that moves files to and from S3-compatible
/// storage and dispatches S3 / DynamoDB-stream style events to Swift triggers.
/// Each target is one room of the design (see README "Architecture").
/// The test suite's fault hooks (`FERRY_TEST_*` variables: a request that
/// traps or hangs the worker, holds that widen a rebalance's window) are
/// compiled only with this trait, which `scripts/test.sh` sets; release
/// builds carry none of them.
let testHooks: [SwiftSetting] = [.define("FERRY_TEST_HOOKS", .when(traits: ["TestHooks"]))]

let package = Package(
    name: "ferry",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "ferry", targets: ["ferry"]),
        .library(name: "FerryCore", targets: ["FerryCore"]),
        .library(name: "FerryTriggerKit", targets: ["FerryTriggerKit"]),
        .library(name: "FerryClient", targets: ["FerryClient"]),
    ],
    traits: [
        .trait(name: "TestHooks", description: "Compile the test suite's fault hooks (FERRY_TEST_* variables) into the binaries. Never for production."),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.0.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.70.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
        // The example handlers' SHA-256 (what a trigger author would reach for).
        .package(url: "https://github.com/apple/swift-crypto", from: "4.0.0"),
        // Tests only: seeded, shrinking generators for the hostile-input properties.
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        // `swift package generate-documentation` (scripts/docs.sh): DocC for the trigger kit and FerryClient.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // C libraries, found with pkg-config.
        .systemLibrary(name: "CRdKafka", pkgConfig: "rdkafka",
                       providers: [.apt(["librdkafka-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CFerryOpenSSL", pkgConfig: "libcrypto",
                       providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CFerrySQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        // curl_easy_setopt / curl_easy_getinfo are variadic: Swift cannot call them.
        .target(name: "CFerryCurlShim", dependencies: ["CCurl"]),
        // glibc's allocator statistics (mallinfo2), for the process gauges in /metrics.
        .target(name: "CFerryProcess"),
        // CRC-32C on the CPU's instruction where there is one; both CRC-32s on tables otherwise.
        .target(name: "CFerryChecksum"),

        // The contracts: requests, statuses, events, errors.
        .target(name: "FerryCore"),
        // The process's concurrency runtime: its threads, the blocking pool, the
        // timer, the one retry policy, async limits.
        .target(name: "FerryConcurrency", dependencies: ["FerryCore", .product(name: "DequeModule", package: "swift-collections")]),
        // The storage seam: the ObjectStore protocol and its values, checksums
        // (CRC, MD5 lanes, SHA-256), byte meters. What the engine sees of storage.
        .target(name: "FerryStorage", dependencies: [
            "FerryCore", "FerryConcurrency", "CFerryChecksum", "CFerryOpenSSL", "CFerryProcess",
        ]),
        // The embedded default's store: objects in a directory.
        .target(name: "FerryLocalStore", dependencies: ["FerryCore", "FerryConcurrency", "FerryStorage"]),
        // S3 over HTTP: SigV4, credentials, the libcurl transport, the S3 client.
        .target(name: "FerryS3", dependencies: [
            "FerryCore", "FerryConcurrency", "FerryStorage", "CCurl", "CFerryCurlShim", "CFerryOpenSSL", "CFerryChecksum",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Metrics", package: "swift-metrics"),
        ]),
        // Running transfers against an ObjectStore with limits.
        .target(name: "FerryEngine", dependencies: [
            "FerryCore", "FerryConcurrency", "FerryStorage",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Metrics", package: "swift-metrics"),
        ]),
        // librdkafka: consumer, producer, embedded mock cluster.
        .target(name: "FerryKafka", dependencies: [
            "CRdKafka", "FerryCore", "FerryConcurrency",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "DequeModule", package: "swift-collections"),
        ], swiftSettings: testHooks),
        // SQLite state of a worker.
        .target(name: "FerryStore", dependencies: [
            "FerryCore", "CFerrySQLite",
            .product(name: "GRDB", package: "GRDB.swift"),
        ]),
        // Record tables: following their compacted topics into a view.
        .target(name: "FerryTables", dependencies: [
            "FerryCore", "FerryConcurrency", "FerryKafka",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // All a trigger author imports of Ferry: handler protocols, context,
        // registrations, event types, and what a handler may do as protocols.
        .target(name: "FerryTriggerKit", dependencies: [
            "FerryCore", .product(name: "Logging", package: "swift-log"),
        ]),
        // Delivering events to the registered handlers: dispatcher, mappings, targets.
        .target(name: "FerryTriggers", dependencies: [
            "FerryCore", "FerryConcurrency", "FerryTriggerKit", "FerryKafka", "FerryStorage", "FerryS3",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Metrics", package: "swift-metrics"),
            .product(name: "DequeModule", package: "swift-collections"),
        ], swiftSettings: testHooks),
        // For producers: enqueue requests, follow their statuses.
        .target(name: "FerryClient", dependencies: [
            "FerryCore", "FerryKafka", "FerryTables", "CFerryOpenSSL",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // Users' trigger handlers and their registration.
        .target(name: "Triggers", dependencies: ["FerryTriggerKit",
                                                 .product(name: "Crypto", package: "swift-crypto"),
                                                 .product(name: "GRDB", package: "GRDB.swift")], path: "triggers",
                exclude: ["README.md", "events"]),
        // The pipeline: consume requests, run transfers, publish outcomes.
        .target(name: "FerryWorker", dependencies: [
            "FerryCore", "FerryConcurrency", "FerryStorage", "FerryLocalStore", "FerryS3", "FerryEngine", "FerryKafka", "FerryStore", "FerryTriggerKit", "FerryTriggers", "FerryTables", "CFerryProcess",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "JWTKit", package: "jwt-kit"),
            .product(name: "Metrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "Yams", package: "Yams"),
        ], swiftSettings: testHooks),
        .executableTarget(name: "ferry", dependencies: [
            "FerryCore", "FerryConcurrency", "FerryStorage", "FerryLocalStore", "FerryS3", "FerryEngine", "FerryKafka", "FerryStore", "FerryTriggerKit", "FerryTriggers", "FerryTables",
            "FerryWorker", "FerryClient", "Triggers",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),

        // Starts the real peers the tests run against (mock cluster, moto, Ceph RGW, ferry processes).
        .target(name: "FerryTestSupport", dependencies: [
                    "FerryKafka", "FerryCore", "FerryConcurrency", "FerryStorage", "FerryLocalStore", "FerryS3", .product(name: "PropertyBased", package: "swift-property-based"),
                    .product(name: "Logging", package: "swift-log"), .product(name: "JWTKit", package: "jwt-kit"),
                ], path: "Tests/FerryTestSupport", swiftSettings: testHooks),
        .testTarget(name: "FerryCoreTests", dependencies: [
            "FerryCore", "FerryConcurrency", "FerryTestSupport", .product(name: "PropertyBased", package: "swift-property-based"),
        ]),
        .testTarget(name: "FerryS3Tests", dependencies: [
            "FerryS3", "FerryConcurrency", "FerryStorage", "FerryLocalStore", "CFerryChecksum", "FerryTestSupport", .product(name: "PropertyBased", package: "swift-property-based"),
        ]),
        .testTarget(name: "FerryTriggersTests", dependencies: [
            "FerryTriggerKit", "FerryTriggers", "Triggers", "FerryKafka", "FerryStorage", "FerryLocalStore", "FerryS3", "FerryTestSupport",
        ]),
        .testTarget(name: "FerryEngineTests", dependencies: [
            "FerryConcurrency", "FerryEngine", "FerryStorage", "FerryLocalStore", "FerryS3", "FerryTestSupport"]),
        .testTarget(name: "FerryKafkaTests", dependencies: ["FerryKafka", "FerryTestSupport"]),
        .testTarget(name: "FerryStoreTests", dependencies: ["FerryStore", "FerryTestSupport"]),
        .testTarget(name: "FerryWorkerTests", dependencies: [
            "FerryWorker", "FerryConcurrency", "CFerryProcess", "FerryTriggerKit", "FerryTriggers", "FerryEngine", "FerryStorage", "FerryLocalStore", "FerryS3", "FerryStore", "FerryKafka", "FerryTestSupport", .product(name: "JWTKit", package: "jwt-kit"),
            .product(name: "PropertyBased", package: "swift-property-based"),
            .product(name: "Metrics", package: "swift-metrics"), .product(name: "Prometheus", package: "swift-prometheus"),
        ]),
        .testTarget(name: "FerryIntegrationTests", dependencies: [
            "FerryCore", "FerryKafka", "FerryClient", "FerryStorage", "FerryLocalStore", "FerryS3", "FerryTestSupport", .product(name: "JWTKit", package: "jwt-kit"),
            .product(name: "PropertyBased", package: "swift-property-based"),
        ]),
    ]
)
