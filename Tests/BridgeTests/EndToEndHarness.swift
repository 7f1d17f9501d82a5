import APNSCore
import APNSSimulator
import Configuration
import Crypto
import Foundation
import Kafka
import Logging
import Prometheus
import ServiceLifecycle
import Synchronization
import TestSupport
import TestWaiting
import Testing

@testable import Bridge
@testable import BridgeCore

/// The whole product for one test, on a ``TestWorld`` (a Kafka broker — librdkafka's mock cluster, or a real broker
/// shared by a suite — and the APNs simulator over TLS + HTTP/2): the input topic and the result topics, a
/// configuration file that points at both, and `pushbridge run` — either in process (``BridgeRuntime``) or as a
/// child process. Open one with ``withEndToEnd(partitions:scenario:broker:_:)``.
struct EndToEnd: Sendable {
    static let keyID = "TESTKEY001"
    static let teamID = "TESTTEAM01"

    /// The broker, the simulator and the directory.
    let world: TestWorld
    /// The input topic; on a shared broker its name is unique to this world.
    let inputTopic: String
    /// The outcome, invalid-token and dead-letter topics, in that order; unique on a shared broker too.
    let topics: [String]

    /// The broker: a mock cluster of this world's own, or a broker shared with other tests.
    var broker: any TestKafkaBroker { self.world.broker }
    var simulator: APNSSimulatorServer { self.world.simulator }
    var directory: URL { self.world.directory }
    var tls: TestTLS { self.world.tls }
    /// The mock cluster, for the tests that make it fail.
    var cluster: KafkaMockCluster { self.world.cluster }

    init(_ world: TestWorld) {
        self.world = world
        self.inputTopic = world.topic("events")
        self.topics = TestWorld.resultTopicNames.map(world.topic)
    }

    /// What ``withEndToEnd(partitions:scenario:broker:_:)`` opens: the input topic with `partitions`
    /// partitions and the result topics — on a new mock cluster, or topics of their own on `broker` — and a
    /// simulator for `scenario` (its topics and JWT key are filled in here).
    static func world(partitions: Int32, scenario: SimulatorScenario, broker: (any TestKafkaBroker)?)
        -> TestWorld.Configuration
    {
        var scenario = scenario
        scenario.topics = ["com.example.app"]
        return TestWorld.Configuration(
            topics: [("events", partitions)] + TestWorld.resultTopicNames.map { ($0, 1) }, scenario: scenario,
            keyID: Self.keyID, teamID: Self.teamID, broker: broker, sharedTopicPrefix: "e2e")
    }

    func write(key: P256.Signing.PrivateKey, to name: String) throws {
        try self.world.write(key.pemRepresentation, to: name)
    }

    /// A configuration file for this cluster and simulator; returns its path.
    ///
    /// - Parameters:
    ///   - routes: the `routes:` entries as YAML (indented by two spaces); `nil` for the one `alerts` route.
    ///   - adminListen: `admin.listen`; port 0 picks a free one (in process, ``BridgeRuntime/Started`` says
    ///     which).
    ///   - apps: the `apps:` entries as YAML (indented by two spaces); `nil` for none.
    ///   - outcomes: more `outcomes:` keys as YAML lines (`key: source_key`), after the topics.
    ///   - proxy: `apns.proxy`; `nil` leaves the key out.
    func configuration(
        group: String = "pushbridge",
        maxInFlight: Int = 200,
        keyFile: String = "AuthKey.p8",
        maxAttempts: Int = 4,
        logLevel: String = "error",
        connections: Int = 2,
        routes: String? = nil,
        adminListen: String = "127.0.0.1:0",
        name: String? = nil,
        apps: String? = nil,
        producerProperties: [String: String] = [:],
        consumerProperties: [String: String] = [:],
        shutdown: String = "drain_timeout: 5s",
        outcomes: [String] = [],
        proxy: String? = nil
    ) throws -> String {
        let routes =
            routes ?? """
                  - name: alerts
                    input_topic: \(self.inputTopic)
                    match: { kind: alert }
                    device_tokens: "{{tokens}}"
                    topic: com.example.app
                    expiration: "{{expires}}"
                    payload:
                      aps:
                        alert: "{{text}}"
                """
        // Short group timings, as on every test broker (docs/kafka.md); `consumerProperties` may override them.
        let consumer = ["session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "log_level": "0"]
            .merging(consumerProperties) { _, given in given }
        let yaml = """
            kafka:
              bootstrap_servers: "\(self.broker.bootstrapServers)"
              group_id: \(group)
              commit_interval: 200ms
              max_in_flight: \(maxInFlight)
              consumer_properties:
            \(consumer.sorted { $0.key < $1.key }.map { "    \($0.key): \($0.value)" }.joined(separator: "\n"))
              producer_properties:
                log_level: 0
            \(producerProperties.sorted { $0.key < $1.key }.map { "    \($0.key): \($0.value)" }.joined(separator: "\n"))
            apns:
              environment: sandbox
              endpoint: https://127.0.0.1:\(self.simulator.port)
              ca_file: \(self.tls.caCertificatePath)
              auth:
                type: token
                key_file: \(self.world.path(keyFile))
                key_id: \(Self.keyID)
                team_id: \(Self.teamID)
              connections: \(connections)\(proxy.map { "\n  proxy: \"\($0)\"" } ?? "")
              request_timeout: 5s
              retry:
                max_attempts: \(maxAttempts)
                initial_backoff: 20ms
                max_backoff: 200ms
            \(apps.map { "apps:\n" + $0 } ?? "")
            routes:
            \(routes)
            outcomes:
              topic: \(self.topics[0])
              invalid_tokens_topic: \(self.topics[1])
              dead_letter_topic: \(self.topics[2])\(outcomes.map { "\n  " + $0 }.joined())
            admin:
              listen: \(adminListen)
            logging:
              level: \(logLevel)
            shutdown:
              \(shutdown)

            """
        let path = self.directory.appendingPathComponent("pushbridge-\(name ?? group).yaml").path
        try Data(yaml.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A configuration with one app, `legacy`, that speaks the binary protocol with this world's client certificate
    /// (`binary` is its `binary:` section as flow YAML), and the `alerts` route sending through it.
    func binaryConfiguration(gatewayPort: Int, binary: String, logLevel: String = "error") throws -> String {
        let apps = """
              legacy:
                protocol: binary
                endpoint: "127.0.0.1:\(gatewayPort)"
                ca_file: \(self.tls.caCertificatePath)
                auth: { type: certificate, cert_file: \(self.tls.clientCertificatePath), key_file: \(self.tls.clientKeyPath) }
                binary: \(binary)
            """
        let routes = """
              - name: alerts
                input_topic: \(self.inputTopic)
                app: legacy
                match: { kind: alert }
                device_tokens: "{{tokens}}"
                topic: com.example.app
                payload:
                  aps:
                    alert: "{{text}}"
            """
        return try self.configuration(logLevel: logLevel, routes: routes, apps: apps)
    }

    // MARK: Events

    /// A well-formed device token (64 hex characters) from a number.
    static func token(_ number: Int) -> String { String(format: "%064x", number) }

    /// An event that matches the route, with `tokens`.
    static func alert(_ tokens: [String], expires: Int64? = nil) -> String {
        let list = tokens.map { "\"\($0)\"" }.joined(separator: ",")
        let expiry = expires.map { #","expires":\#($0)"# } ?? ""
        return #"{"kind":"alert","text":"hello \"world\"","tokens":[\#(list)]\#(expiry)}"#
    }

    /// Produces `values` round robin over the input partitions; returns how many went to each partition.
    @discardableResult
    func produce(_ values: [String], partitions: Int32 = 4) async throws -> [Int32: Int64] {
        let producer = try KafkaProducer(configuration: producerConfiguration(self.broker), logger: quietLogger())
            .running()
        var counts: [Int32: Int64] = [:]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, value) in values.enumerated() {
                let partition = Int32(index) % partitions
                counts[partition, default: 0] += 1
                group.addTask {
                    try await producer.send(
                        topic: self.inputTopic, key: Array("key-\(index)".utf8), value: Array(value.utf8),
                        partition: partition
                    )
                }
            }
            try await group.waitForAll()
        }
        await producer.close()
        return counts
    }

    // MARK: Running the bridge in process

    /// Runs `pushbridge run`'s runtime in process until `body` returns, then shuts it down gracefully.
    func withBridge<Result: Sendable>(
        configurationPath: String,
        metricsFactory: (@Sendable (PrometheusCollectorRegistry) -> Void)? = nil,
        _ body: @Sendable (BridgeRuntime.Started) async throws -> Result
    ) async throws -> Result {
        let loaded = try ConfigurationLoader(environment: [:]).load(file: configurationPath)
        let registry = PrometheusCollectorRegistry()
        let runtime = BridgeRuntime(loaded: loaded, registry: registry, logger: quietLogger())
        let sender = try APNSSender(configuration: loaded.configuration, logger: quietLogger())
        let (startedStream, continuation) = AsyncStream.makeStream(of: (BridgeRuntime.Started, ServiceGroup).self)
        let run = Task {
            try await runtime.run(sender: sender, signals: []) { started, group in
                continuation.yield((started, group))
            }
        }
        var iterator = startedStream.makeAsyncIterator()
        guard let (started, group) = await iterator.next() else {
            throw TimedOut(what: "the bridge to start")
        }
        do {
            let result = try await body(started)
            await group.triggerGracefulShutdown()
            try await run.value
            return result
        } catch {
            await group.triggerGracefulShutdown()
            _ = try? await run.value
            throw error
        }
    }

    // MARK: Reading results

    /// Reads the result topics from the start until `done` holds (at most `timeout`), without joining a group.
    func results(
        timeout: Duration = .seconds(60),
        expectComplete: Bool = true,
        until done: @escaping @Sendable (Results) -> Bool
    ) async throws -> Results {
        let (results, finished) = try await self.world.readBack(
            self.topics, as: Results.self, timeout: timeout, until: done)
        if !finished && expectComplete {
            Issue.record(
                "results incomplete after \(timeout): \(results.outcomes.count) outcomes, \(results.deadLetters.count) dead letters"
            )
        }
        return results
    }

    /// The group's committed offsets of the input topic.
    func committed(group: String = "pushbridge", partitions: Int32 = 4) async throws -> [Int32: Int64] {
        try await self.world.committedOffsets(group: group, topic: self.inputTopic, partitions: partitions)
    }
}

/// Opens an ``EndToEnd`` (``EndToEnd/world(partitions:scenario:broker:)``), runs `body` with it, and closes its world
/// when `body` returns or throws.
func withEndToEnd<Result>(
    partitions: Int32 = 4, scenario: SimulatorScenario = SimulatorScenario(), broker: (any TestKafkaBroker)? = nil,
    _ body: (EndToEnd) async throws -> Result
) async throws -> Result {
    try await withTestWorld(EndToEnd.world(partitions: partitions, scenario: scenario, broker: broker)) { world in
        try await body(EndToEnd(world))
    }
}

/// What the result topics held.
struct Results: ReadBackRecords {
    struct Outcome: Sendable {
        var json: [String: String]
        var raw: [UInt8]
        var headers: [KafkaHeader] = []
        /// The record's Kafka key as text.
        var key: String? = nil
        var notificationID: String { self.json["notification_id"] ?? "" }
        var status: String { self.json["status"] ?? "" }
        var token: String { self.json["device_token"] ?? "" }
        var reason: String? { self.json["reason"] }
        /// The `pushbridge-protocol` header's value; `nil` when absent.
        var providerProtocol: String? { Results.providerProtocol(self.headers) }
        /// The event it came from: the record's `source.partition` and `source.offset`; `nil` when it has none.
        var sourcePlace: (partition: Int, offset: Int)? {
            let object = try? JSONSerialization.jsonObject(with: Data(self.raw)) as? [String: Any]
            guard let source = object?["source"] as? [String: Any], let partition = source["partition"] as? Int,
                let offset = source["offset"] as? Int
            else { return nil }
            return (partition, offset)
        }
        /// `completed_at` as a date; `nil` when absent or not an ISO 8601 time with fractional seconds.
        var completedAt: Date? {
            let parser = ISO8601DateFormatter()
            parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            return self.json["completed_at"].flatMap { parser.date(from: $0) }
        }
    }

    var outcomes: [Outcome] = []
    var invalidTokens: [[String: String]] = []
    var invalidTokenValues: [[UInt8]] = []
    /// The `pushbridge-protocol` header of each invalid-token record (`nil`: absent), in the order of `invalidTokens`.
    var invalidTokenProtocols: [String?] = []
    /// The invalid-token records as consumed, with their headers.
    var invalidTokenMessages: [KafkaMessage] = []
    var deadLetters: [KafkaMessage] = []

    mutating func add(_ batch: [KafkaMessage]) {
        for message in batch {
            // On a shared broker, the topic names carry a prefix of the test's own.
            if message.topic.hasSuffix("pushbridge.outcomes") {
                self.outcomes.append(
                    Outcome(
                        json: Self.strings(message.value), raw: message.value ?? [], headers: message.headers,
                        key: message.key.map { String(decoding: $0, as: UTF8.self) }))
            } else if message.topic.hasSuffix("pushbridge.invalid-tokens") {
                self.invalidTokens.append(Self.strings(message.value))
                self.invalidTokenValues.append(message.value ?? [])
                self.invalidTokenProtocols.append(Self.providerProtocol(message.headers))
                self.invalidTokenMessages.append(message)
            } else {
                self.deadLetters.append(message)
            }
        }
    }

    /// Distinct notification ids among the outcomes.
    var notificationIDs: Set<String> { Set(self.outcomes.map(\.notificationID)) }

    /// The last outcome per notification id.
    var latestByID: [String: Outcome] {
        var latest: [String: Outcome] = [:]
        for outcome in self.outcomes { latest[outcome.notificationID] = outcome }
        return latest
    }

    /// The value of the `pushbridge-protocol` header among `headers`; `nil` when absent.
    static func providerProtocol(_ headers: [KafkaHeader]) -> String? {
        headers.first { $0.name == "pushbridge-protocol" }.map { String(decoding: $0.value ?? [], as: UTF8.self) }
    }

    /// A record's top-level fields as text (numbers and null as their JSON text).
    static func strings(_ value: [UInt8]?) -> [String: String] {
        guard let value, let object = try? JSONSerialization.jsonObject(with: Data(value)) as? [String: Any] else {
            return [:]
        }
        var result: [String: String] = [:]
        for (key, value) in object {
            switch value {
            case let string as String: result[key] = string
            case is NSNull: continue
            case let number as NSNumber: result[key] = number.stringValue
            default: result[key] = "\(value)"
            }
        }
        return result
    }
}
