// swift-tools-version: 6.2
//
// PushBridge: a Kafka-to-APNs bridge. Each C library is wrapped once, pure code (routes, templates, APNs models)
// has no I/O, and the pipeline core sees only small protocols (docs/architecture.md, "The parts and their
// boundaries").

import PackageDescription

/// Settings every PushBridge target compiles with: Swift 6 mode (strict concurrency), no warnings, `any` written out
/// for every existential, and a member usable only from a module the file imports itself.
let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .treatAllWarnings(as: .error),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "pushbridge",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "pushbridge", targets: ["PushBridgeCLI"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "5.0.1"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
    ],
    targets: [
        // MARK: C libraries (system packages, installed by the Makefile)
        .systemLibrary(
            name: "CRdKafka",
            pkgConfig: "rdkafka",
            providers: [.apt(["librdkafka-dev"])]
        ),
        .systemLibrary(
            name: "CNghttp2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]
        ),

        // MARK: Waiting for a signal: the one primitive every module waits with (no dependencies)
        .target(name: "Waiting", swiftSettings: strict),
        // MARK: Outside text made safe for records, logs and errors, and "did you mean" (no dependencies)
        .target(name: "SafeText", swiftSettings: strict),
        // MARK: A value shared by its copies until one changes it, for the hot path's values (no dependencies)
        .target(name: "CopyOnWrite", swiftSettings: strict),

        // MARK: Kafka: the only code that calls rd_kafka_*
        .target(
            name: "Kafka",
            dependencies: [
                "CRdKafka",
                "Waiting",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // MARK: The egress proxy: proxy URLs, HTTPS_PROXY / NO_PROXY, and the CONNECT handshake as a value (no I/O)
        .target(name: "EgressProxy", dependencies: ["SafeText"], swiftSettings: strict),

        // MARK: HTTP/2 over libnghttp2, driven by SwiftNIO: the only code that calls nghttp2_*; and how every APNs
        // connection is opened (directly, or through the egress proxy's CONNECT tunnel)
        .target(
            name: "HTTP2",
            dependencies: [
                "SafeText",
                "CopyOnWrite",
                "CNghttp2",
                "EgressProxy",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // MARK: APNs: pure models, the client, and the simulator
        // SHA-1 with the x86 SHA extensions, for notification ids (APNSCore's SHA1 uses it when the CPU has them).
        .target(name: "CSHA1"),
        .target(
            name: "APNSCore",
            dependencies: [
                "CSHA1",
                "CopyOnWrite",
                "Waiting",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        // The legacy binary provider protocol: framing, error packets, the write window, feedback tuples (no I/O).
        .target(
            name: "BinaryProvider",
            dependencies: [
                "APNSCore",
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "APNSClient",
            dependencies: [
                "SafeText",
                "Waiting",
                "EgressProxy",
                "BinaryProvider",
                "APNSCore",
                "HTTP2",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "APNSSimulator",
            dependencies: [
                "BinaryProvider",
                "APNSCore",
                "HTTP2",
                "Waiting",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // MARK: Routes and templates (pure) and configuration loading
        .target(
            name: "Routing",
            dependencies: [
                "SafeText",
                "APNSCore",
                .product(name: "Mustache", package: "swift-mustache"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "Configuration",
            dependencies: [
                "SafeText",
                "EgressProxy",
                "Routing",
                "APNSCore",
                "BinaryProvider",
                .product(name: "Yams", package: "Yams"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),

        // MARK: The bridge pipeline: the core (no I/O of its own, no C library) and its adapters and application
        .target(
            name: "BridgeCore",
            dependencies: [
                "SafeText",
                "Waiting",
                "APNSCore",
                "Routing",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "Bridge",
            dependencies: [
                "Waiting",
                "EgressProxy",
                "BridgeCore",
                "Kafka",
                "APNSClient",
                "Routing",
                "Configuration",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: strict
        ),

        // MARK: pushbridge doctor: production checks (credentials, certificates, clock, Kafka, APNs)
        .target(
            name: "DoctorChecks",
            dependencies: [
                "EgressProxy",
                "Kafka",
                "HTTP2",
                "APNSCore",
                "APNSClient",
                "Configuration",
                "BinaryProvider",
                "Routing",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: strict
        ),

        // MARK: The executable
        .executableTarget(
            name: "PushBridgeCLI",
            dependencies: [
                "Bridge",
                "EgressProxy",
                "DoctorChecks",
                "Kafka",
                "APNSCore",
                "APNSClient",
                "APNSSimulator",
                "Routing",
                "Configuration",
                "BinaryProvider",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict,
            // jemalloc replaces glibc's malloc in the executable: the bridge's threads allocate and free each
            // other's objects, and glibc's arena locks cost ~20% of its CPU (docs/benchmarks.md, "The allocator").
            linkerSettings: [.linkedLibrary("jemalloc", .when(platforms: [.linux]))]
        ),

        // MARK: Benchmarks
        .executableTarget(
            name: "MapperBench",
            dependencies: ["Routing"],
            path: "Benchmarks/MapperBench",
            swiftSettings: strict
        ),

        // MARK: Test helpers shipped as a library (mock cluster fixtures, TLS material, child processes)
        .target(
            name: "TestSupport",
            dependencies: [
                "Kafka",
                "APNSCore",
                "APNSSimulator",
                "TestWaiting",
                "Waiting",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),

        // MARK: Benchmarks (not tests): Kafka consume throughput, Swift layer vs. a plain C loop
        .target(name: "KafkaConsumeC", dependencies: ["CRdKafka"], path: "Benchmarks/KafkaConsumeC"),
        .executableTarget(
            name: "KafkaConsumeBenchmark",
            dependencies: [
                "Kafka",
                "KafkaConsumeC",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/KafkaConsume",
            swiftSettings: strict
        ),
        // MARK: Benchmarks: nghttpd and h2load (nghttp2's server and load client) as references, shared
        .target(
            name: "BenchSupport",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Benchmarks/BenchSupport",
            swiftSettings: strict
        ),
        // MARK: Benchmarks (make bench-apns, mk/http2.mk)
        .executableTarget(
            name: "APNSBench",
            dependencies: [
                "BenchSupport",
                "HTTP2",
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Benchmarks/APNSBench",
            swiftSettings: strict
        ),

        // MARK: Benchmarks (make bench-binary, mk/binary.mk): the legacy binary provider client against the simulator
        .executableTarget(
            name: "BinaryBench",
            dependencies: [
                "APNSClient",
                "APNSCore",
                "BenchSupport",
                "BinaryProvider",
                "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Benchmarks/BinaryBench",
            swiftSettings: strict
        ),

        // MARK: Benchmarks (make bench, mk/bench.mk): the bridge end to end, `pushbridge run` against nghttpd or the
        // simulator
        .executableTarget(
            name: "BridgeBench",
            dependencies: [
                "APNSCore",
                "APNSSimulator",
                "BenchSupport",
                "Configuration",
                "Kafka",
                "Routing",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/BridgeBench",
            swiftSettings: strict
        ),

        // MARK: The churn soak (make soak, mk/soak.mk): `pushbridge run` instances join, die and leave a consumer group
        // while events flow; opt-in, not part of make test
        .executableTarget(
            name: "Soak",
            dependencies: [
                "APNSSimulator",
                "BenchSupport",
                "Bridge",
                "Kafka",
                "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/Soak",
            swiftSettings: strict
        ),

        // MARK: Tests
        .testTarget(name: "WaitingTests", dependencies: ["Waiting", "TestWaiting"], swiftSettings: strict),
        .testTarget(name: "EgressProxyTests", dependencies: ["EgressProxy"], swiftSettings: strict),
        .testTarget(
            name: "KafkaTests",
            dependencies: [
                "Kafka", "TestSupport", "TestWaiting", "Waiting", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HTTP2Tests", dependencies: ["HTTP2", "EgressProxy", "TestSupport", "TestWaiting", "Waiting"],
            swiftSettings: strict),
        .testTarget(name: "BinaryProviderTests", dependencies: ["BinaryProvider", "APNSCore"], swiftSettings: strict),
        .testTarget(
            name: "APNSTests",
            dependencies: [
                "CopyOnWrite",
                "EgressProxy",
                "TestWaiting",
                "APNSCore",
                "APNSClient",
                "BinaryProvider",
                "APNSSimulator",
                "HTTP2",
                "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "RoutingTests",
            dependencies: [
                "Routing",
                "APNSCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "ConfigurationTests",
            dependencies: [
                "EgressProxy",
                "Configuration",
                "Routing",
                "APNSCore",
                "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            exclude: ["Fixtures", "Golden"],
            swiftSettings: strict
        ),
        // The tests' waits (timeouts, polling), depending on nothing else so that every test target can use them.
        .target(name: "TestWaiting", dependencies: ["Waiting"], path: "Sources/TestWaiting", swiftSettings: strict),
        // What the pipeline tests share, without a C library (BridgeCoreTests link nothing else).
        .target(
            name: "PipelineTestSupport",
            dependencies: ["BridgeCore", "APNSCore", "Routing"],
            path: "Sources/PipelineTestSupport",
            swiftSettings: strict
        ),
        .testTarget(
            name: "SafeTextTests",
            dependencies: ["SafeText"],
            swiftSettings: strict
        ),
        // The pipeline core's tests: no I/O library linked (no librdkafka, no NIO, no swift-nio-ssl); APNSCore brings
        // swift-crypto (provider-token signatures).
        .testTarget(
            name: "BridgeCoreTests",
            dependencies: [
                "TestWaiting",
                "Waiting",
                "BridgeCore",
                "PipelineTestSupport",
                "APNSCore",
                "Routing",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "BridgeTests",
            dependencies: [
                "EgressProxy",
                "TestWaiting",
                "Waiting",
                "Bridge",
                "BridgeCore",
                "PipelineTestSupport",
                "Kafka",
                "APNSCore",
                "APNSClient",
                "APNSSimulator",
                "BinaryProvider",
                "Configuration",
                "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "PushBridgeCLITests",
            dependencies: [
                "PushBridgeCLI",
                "Bridge",
                "BridgeCore",
                "Configuration",
                "Kafka",
                "TestSupport",
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "BenchTests",
            dependencies: [
                "BenchSupport",
                "Bridge",
                "BridgeCore",
                "HTTP2",
                "Kafka",
                "TestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "DoctorTests",
            dependencies: [
                "EgressProxy",
                "DoctorChecks",
                "Kafka",
                "APNSCore",
                "APNSSimulator",
                "BinaryProvider",
                "Configuration",
                "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: strict
        ),
    ]
)

// MARK: Fuzz targets (make fuzz, make fuzz-smoke: mk/fuzz.mk, docs/fuzzing.md)
//
// Each is an executable whose one file holds `fuzzOne(_:)`. In the normal build it is a stand-alone driver that
// replays the committed corpus and a fixed number of seeded mutations (`make fuzz-smoke`, part of `make test`).
// `make fuzz` builds them again in .build-fuzz with `-sanitize=fuzzer,address -DPUSHBRIDGE_LIBFUZZER`, where
// `fuzzOne` becomes libFuzzer's `LLVMFuzzerTestOneInput` and libFuzzer's `main` drives it.
package.targets += [
    .target(name: "FuzzSupport", path: "Fuzz/FuzzSupport", swiftSettings: strict),
    .executableTarget(
        name: "FuzzEventParser",
        dependencies: ["FuzzSupport", "Routing", "APNSCore"],
        path: "Fuzz/FuzzEventParser",
        swiftSettings: strict
    ),
    .executableTarget(
        name: "FuzzTemplate",
        dependencies: ["FuzzSupport", "Routing", "APNSCore"],
        path: "Fuzz/FuzzTemplate",
        swiftSettings: strict
    ),
    .executableTarget(
        name: "FuzzConfiguration",
        dependencies: ["FuzzSupport", "Configuration", "Routing"],
        path: "Fuzz/FuzzConfiguration",
        swiftSettings: strict
    ),
    .executableTarget(
        name: "FuzzDeliveryStateMachine",
        dependencies: ["FuzzSupport", "BridgeCore", "APNSCore"],
        path: "Fuzz/FuzzDeliveryStateMachine",
        swiftSettings: strict
    ),
    .executableTarget(
        name: "FuzzBinaryProtocol",
        dependencies: ["FuzzSupport", "BinaryProvider"],
        path: "Fuzz/FuzzBinaryProtocol",
        swiftSettings: strict
    ),
    .executableTarget(
        name: "FuzzSimulatorRequest",
        dependencies: [
            "FuzzSupport", "APNSSimulator", "APNSCore", .product(name: "Crypto", package: "swift-crypto"),
        ],
        path: "Fuzz/FuzzSimulatorRequest",
        swiftSettings: strict
    ),
]
