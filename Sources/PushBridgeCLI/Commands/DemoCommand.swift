import APNSCore
import APNSSimulator
import ArgumentParser
import Bridge
import Configuration
import Crypto
import Foundation
import Kafka
import Logging
import Prometheus
import ServiceLifecycle
import Synchronization

/// `pushbridge demo`: the whole product in one process, nothing to install. An embedded Kafka cluster
/// (librdkafka's mock cluster, reachable on loopback), the APNs simulator, `config/demo.yaml`, N sample
/// events with some bad ones, a live progress line, and a summary read back from the result topics.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run an embedded Kafka cluster, the APNs simulator and the bridge on sample events.",
        discussion: """
            Writes a throw-away provider key and the simulator's certificate into $PUSHBRIDGE_DEMO_DIR \
            (default .build/demo), starts the simulator on 127.0.0.1:2197 and an in-process Kafka cluster, \
            produces the sample events, runs the bridge until every event is accounted for, and prints what \
            happened to them. Exit 0 when every event is accounted for.
            """
    )

    @Option(help: "How many sample events to produce.")
    var events: Int = 1000

    @Option(help: "The demo configuration.")
    var config: String = "config/demo.yaml"

    func validate() throws {
        guard (1...100_000).contains(self.events) else {
            throw ValidationError("--events must be between 1 and 100000")
        }
    }

    func run() async throws {
        let (loaded, material) = try self.loadConfiguration()
        let logger = LoggingBootstrap.bootstrap(loaded.configuration.logging)
        let configuration = loaded.configuration
        let simulator = try await Self.startSimulator(configuration: configuration, material: material, logger: logger)

        let cluster = try BridgeRuntime.startEmbeddedCluster(for: configuration, logger: logger)
        defer { cluster.close() }
        let plan = DemoEvents(count: self.events)
        self.printBanner(cluster: cluster, endpoint: configuration.apns.effectiveEndpoint, plan: plan)
        try await plan.produce(to: cluster)

        let tally = try await Self.runBridge(loaded: loaded, cluster: cluster, plan: plan, logger: logger)
        await simulator.shutdown()
        try Self.report(tally, plan: plan, simulator: simulator.statistics)
    }

    /// Writes the throw-away key and certificate into `$PUSHBRIDGE_DEMO_DIR` (default `.build/demo`), then loads
    /// `--config` with that directory in its environment; an invalid configuration exits 2.
    private func loadConfiguration() throws -> (LoadedConfiguration, DemoMaterial) {
        var environment = ProcessInfo.processInfo.environment
        let directory = environment["PUSHBRIDGE_DEMO_DIR"] ?? ".build/demo"
        environment["PUSHBRIDGE_DEMO_DIR"] = directory
        let material = try DemoMaterial.write(into: directory)

        let loaded: LoadedConfiguration
        do {
            loaded = try ConfigurationLoader(environment: environment).load(file: self.config)
        } catch {
            FileHandleOutput.standardError(error.problems.map { "\($0)\n" }.joined())
            throw ExitCode(2)
        }
        return (loaded, material)
    }

    /// The APNs simulator at the configuration's endpoint, trusting the demo's key, with the demo's unregistered
    /// tokens, 1% of answers 429 and 2 ms of latency; a port already taken exits 1.
    private static func startSimulator(
        configuration: BridgeConfiguration, material: DemoMaterial, logger: Logger
    ) async throws -> APNSSimulatorServer {
        let endpoint = configuration.apns.effectiveEndpoint
        var scenario = SimulatorScenario()
        scenario.topics = ["com.example.demo"]
        scenario.jwtKeys = [
            .init(keyID: DemoMaterial.keyID, teamID: DemoMaterial.teamID, publicKey: material.signingKey.publicKey)
        ]
        for token in DemoEvents.unregisteredTokens { scenario.unregisteredTokens[token] = 1_763_000_000_000 }
        scenario.tooManyRequestsRate = 0.01
        scenario.latency = .milliseconds(2)
        do {
            return try await APNSSimulatorServer.start(
                scenario: scenario,
                certificatePEMPath: material.certificatePath,
                privateKeyPEMPath: material.privateKeyPath,
                host: endpoint.host,
                port: endpoint.port,
                logger: logger.with(label: "pushbridge.simulator")
            )
        } catch {
            FileHandleOutput.standardError(
                "pushbridge demo: cannot start the APNs simulator on \(endpoint): \(error)\n"
                    + "Is another demo or simulator running on that port?\n"
            )
            throw ExitCode(1)
        }
    }

    /// Where everything runs, and what is about to be produced.
    private func printBanner(cluster: KafkaMockCluster, endpoint: APNSSettings.Endpoint, plan: DemoEvents) {
        FileHandleOutput.standardOutput("PushBridge demo" + "\n")
        FileHandleOutput.standardOutput(
            "  Kafka (embedded):  \(cluster.bootstrapServers)   try: kcat -b \(cluster.bootstrapServers) -L" + "\n")
        FileHandleOutput.standardOutput("  APNs simulator:    \(endpoint)" + "\n")
        FileHandleOutput.standardOutput("  configuration:     \(self.config)" + "\n")
        FileHandleOutput.standardOutput("  producing \(plan.events.count) sample events: \(plan.description)" + "\n")
    }

    /// Runs the bridge on `cluster` while a reader tallies the result topics, with a live progress line, until
    /// every event of `plan` is accounted for (or 120 s passed); returns the tally.
    private static func runBridge(
        loaded: LoadedConfiguration, cluster: KafkaMockCluster, plan: DemoEvents, logger: Logger
    ) async throws -> DemoTally {
        let configuration = loaded.configuration
        let sender = try APNSSender(configuration: configuration, logger: logger)
        let runtime = BridgeRuntime(loaded: loaded, registry: PrometheusCollectorRegistry(), logger: logger)
        let tally = DemoTally(outcomes: configuration.outcomes, registry: runtime.registry)
        let reader = try KafkaConsumer(
            configuration: DemoEvents.readerConfiguration(cluster),
            topics: [
                configuration.outcomes.outcomes, configuration.outcomes.invalidTokens,
                configuration.outcomes.deadLetters,
            ],
            logger: logger.with(label: "pushbridge.demo.reader")
        ).running()
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                try await runtime.run(sender: sender, embeddedCluster: cluster) { _, group in
                    // Stop once every event is accounted for, or after a generous bound.
                    Task {
                        let deadline = ContinuousClock.now + .seconds(120)
                        while !tally.accountsFor(plan), ContinuousClock.now < deadline {
                            let progress = tally.progressLine(plan: plan, elapsed: ContinuousClock.now - started)
                            FileHandleOutput.standardOutput("\r" + progress)
                            try? await Task.sleep(for: .milliseconds(200))
                        }
                        FileHandleOutput.standardOutput(
                            "\r" + tally.progressLine(plan: plan, elapsed: ContinuousClock.now - started) + "\n"
                        )
                        await group.triggerGracefulShutdown()
                    }
                }
            }
            tasks.addTask {
                for try await batch in reader.batches {
                    tally.add(batch)
                }
            }
            try await tasks.next()
            await reader.close()
            try await tasks.waitForAll()
        }
        return tally
    }

    /// Prints the summary; exits 1 naming every count that is short or over.
    private static func report(_ tally: DemoTally, plan: DemoEvents, simulator: SimulatorStatistics) throws {
        FileHandleOutput.standardOutput(tally.summary(plan: plan, simulator: simulator) + "\n")
        let discrepancies = tally.discrepancies(plan)
        if !discrepancies.isEmpty {
            FileHandleOutput.standardError(
                "pushbridge demo: not every event was accounted for:\n"
                    + discrepancies.map { "  \($0)\n" }.joined()
            )
            throw ExitCode(1)
        }
    }
}

/// The demo's throw-away credentials: the simulator's certificate (also the client's trust root) and a
/// provider signing key.
struct DemoMaterial {
    static let keyID = "DEMO000001"
    static let teamID = "DEMOTEAM01"

    var certificatePath: String
    var privateKeyPath: String
    var signingKey: P256.Signing.PrivateKey

    static func write(into directory: String) throws -> DemoMaterial {
        let certificate = try SelfSignedCertificate.generate(in: directory)
        let caPath = (directory as NSString).appendingPathComponent("simulator-ca.pem")
        try? FileManager.default.removeItem(atPath: caPath)
        try FileManager.default.copyItem(atPath: certificate.certificatePath, toPath: caPath)
        let key = P256.Signing.PrivateKey()
        let keyPath = (directory as NSString).appendingPathComponent("AuthKey_\(Self.keyID).p8")
        try Data(key.pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyPath))
        return DemoMaterial(
            certificatePath: certificate.certificatePath, privateKeyPath: certificate.privateKeyPath, signingKey: key
        )
    }
}

/// The sample events and what they must become.
struct DemoEvents: Sendable, CustomStringConvertible {
    /// Tokens the simulator says are unregistered (410).
    static let unregisteredTokens = (0..<8).map { String(format: "%064x", 0xdead_0000 + $0) }

    struct Event: Sendable {
        var topic: String
        var key: String
        var value: String
    }

    var events: [Event] = []
    /// Notifications the events produce (one outcome each).
    var notificationCount = 0
    /// Events that become a dead letter.
    var deadLetterCount = 0
    /// Events no route matches.
    var unmatchedCount = 0
    /// Notifications whose token is malformed (rejected locally, invalid token).
    var malformedTokenCount = 0
    /// Notifications to unregistered tokens.
    var unregisteredCount = 0

    init(count: Int) {
        var generator = SplitMix64(seed: 2026)  // the same events on every run
        for index in 0..<count {
            let key = "customer-\(index % 97)"
            switch index % 20 {
            case 0:
                self.events.append(Event(topic: "demo.orders", key: key, value: "this is not JSON {\(index)"))
                self.deadLetterCount += 1
            case 1:
                self.events.append(
                    Event(topic: "demo.orders", key: key, value: #"{"type":"shipped","order":{"id":\#(index)}}"#))
                self.deadLetterCount += 1  // no device tokens
            case 2:
                self.events.append(
                    Event(topic: "demo.orders", key: key, value: #"{"type":"created","order":{"id":\#(index)}}"#))
                self.unmatchedCount += 1
            case 3:
                let token = Self.unregisteredTokens[index % Self.unregisteredTokens.count]
                self.events.append(Event(topic: "demo.orders", key: key, value: Self.order(index, tokens: [token])))
                self.notificationCount += 1
                self.unregisteredCount += 1
            case 4:
                self.events.append(
                    Event(topic: "demo.orders", key: key, value: Self.order(index, tokens: ["not-a-token"])))
                self.notificationCount += 1
                self.malformedTokenCount += 1
            case 5, 6:
                let token = Self.token(&generator)
                self.events.append(
                    Event(
                        topic: "demo.inbox", key: key,
                        value: #"{"device_token":"\#(token)","folders":["inbox","sent"]}"#))
                self.notificationCount += 1
            default:
                let tokens = (0..<Int(generator.next() % 3 + 1)).map { _ in Self.token(&generator) }
                self.events.append(Event(topic: "demo.orders", key: key, value: Self.order(index, tokens: tokens)))
                self.notificationCount += tokens.count
            }
        }
    }

    var description: String {
        "\(self.notificationCount) notifications (\(self.unregisteredCount) to unregistered and "
            + "\(self.malformedTokenCount) to malformed tokens), \(self.deadLetterCount) bad events, "
            + "\(self.unmatchedCount) that no route matches"
    }

    static func order(_ index: Int, tokens: [String]) -> String {
        let list = tokens.map { "\"\($0)\"" }.joined(separator: ",")
        return #"{"type":"shipped","order":{"id":\#(index),"carrier":"Demo Express","eta":"tomorrow"},"#
            + #""customer":{"apns_tokens":[\#(list)],"unread_count":\#(index % 5)}}"#
    }

    static func token(_ generator: inout SplitMix64) -> String {
        (0..<4).map { _ in String(format: "%016llx", generator.next()) }.joined()
    }

    func produce(to cluster: KafkaMockCluster) async throws {
        var configuration = KafkaProducerConfiguration(bootstrapServers: cluster.bootstrapServers)
        configuration.linger = .milliseconds(5)
        configuration.properties = ["log_level": "3"]
        let producer = try KafkaProducer(configuration: configuration, logger: Logger(label: "pushbridge.demo"))
            .running()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for event in self.events {
                group.addTask {
                    try await producer.send(
                        topic: event.topic, key: Array(event.key.utf8), value: Array(event.value.utf8))
                }
            }
            try await group.waitForAll()
        }
        await producer.close()
    }

    static func readerConfiguration(_ cluster: KafkaMockCluster) -> KafkaConsumerConfiguration {
        var configuration = KafkaConsumerConfiguration(
            bootstrapServers: cluster.bootstrapServers, groupID: "pushbridge-demo-reader-\(UUID())"
        )
        configuration.autoOffsetReset = .earliest
        configuration.properties = ["log_level": "3"]
        return configuration
    }
}

/// What became of the sample events so far: the result topics' records (de-duplicated by notification id, dead
/// letters by source coordinates) and the bridge's own count of events no route matched
/// (`pushbridge_events_unmatched_total`, which is all an unmatched event leaves behind).
final class DemoTally: Sendable {
    private struct State {
        var statusByNotification: [String: String] = [:]
        var invalidTokens = Set<String>()
        var deadLetters = Set<String>()
    }

    /// The counts the summary reports, each read from where the bridge put it.
    struct Counts: Sendable {
        /// Outcomes by status (`delivered`, `rejected`, …).
        var byStatus: [String: Int]
        /// Notifications with an outcome.
        var outcomes: Int
        var deadLetters: Int
        var invalidTokens: Int
        /// `pushbridge_events_unmatched_total` over all topics.
        var unmatchedEvents: Int
    }

    /// One number the plan predicts, and what was counted.
    struct Check: Sendable, CustomStringConvertible {
        var counted: Int
        var expected: Int
        /// What is counted, e.g. "dead letters".
        var noun: String
        /// How it was counted, e.g. "written".
        var how: String

        var description: String { "\(self.expected) \(self.noun) expected, \(self.counted) \(self.how)" }
    }

    static let unmatchedMetric = "pushbridge_events_unmatched_total"

    private let outcomes: OutcomeTopics
    private let registry: PrometheusCollectorRegistry
    private let state = Mutex(State())

    /// A tally of the records on `outcomes`' topics and of the metrics in `registry`, the bridge's.
    init(outcomes: OutcomeTopics, registry: PrometheusCollectorRegistry) {
        self.outcomes = outcomes
        self.registry = registry
    }

    func add(_ batch: [KafkaMessage]) {
        self.state.withLock { state in
            for message in batch {
                if message.topic == self.outcomes.deadLetters {
                    let offset = message.headers.first { $0.name == "pushbridge-source-offset" }?.value ?? []
                    let topic = message.headers.first { $0.name == "pushbridge-source-topic" }?.value ?? []
                    let partition = message.headers.first { $0.name == "pushbridge-source-partition" }?.value ?? []
                    state.deadLetters.insert(
                        "\(String(decoding: topic, as: UTF8.self))/\(String(decoding: partition, as: UTF8.self))/"
                            + String(decoding: offset, as: UTF8.self))
                    continue
                }
                guard let value = message.value,
                    let object = try? JSONSerialization.jsonObject(with: Data(value)) as? [String: Any],
                    let id = object["notification_id"] as? String
                else { continue }
                if message.topic == self.outcomes.outcomes {
                    state.statusByNotification[id] = object["status"] as? String ?? "?"
                } else if message.topic == self.outcomes.invalidTokens {
                    state.invalidTokens.insert(id)
                }
            }
        }
    }

    func counts() -> Counts {
        let exposition = self.registry.emitToString()
        let unmatched = Int(PrometheusExposition.sum(of: Self.unmatchedMetric, in: exposition))
        return self.state.withLock { state in
            var byStatus: [String: Int] = [:]
            for status in state.statusByNotification.values { byStatus[status, default: 0] += 1 }
            return Counts(
                byStatus: byStatus, outcomes: state.statusByNotification.count, deadLetters: state.deadLetters.count,
                invalidTokens: state.invalidTokens.count, unmatchedEvents: unmatched
            )
        }
    }

    /// The plan's predictions next to the counts.
    static func checks(_ counts: Counts, plan: DemoEvents) -> [Check] {
        [
            Check(counted: counts.outcomes, expected: plan.notificationCount, noun: "notifications", how: "outcomes"),
            Check(counted: counts.deadLetters, expected: plan.deadLetterCount, noun: "dead letters", how: "written"),
            Check(
                counted: counts.invalidTokens, expected: plan.unregisteredCount + plan.malformedTokenCount,
                noun: "invalid tokens", how: "written"
            ),
            Check(
                counted: counts.unmatchedEvents, expected: plan.unmatchedCount, noun: "unmatched events",
                how: "counted by the bridge (\(Self.unmatchedMetric))"
            ),
        ]
    }

    /// Whether everything the plan predicts has arrived (the demo then stops the bridge).
    func accountsFor(_ plan: DemoEvents) -> Bool {
        Self.checks(self.counts(), plan: plan).allSatisfy { $0.counted >= $0.expected }
    }

    /// Every prediction of the plan that the counts do not meet exactly; empty when every event is accounted for.
    /// More is as wrong as fewer: an unmatched event counted twice, or a notification nobody asked for.
    func discrepancies(_ plan: DemoEvents) -> [String] {
        Self.checks(self.counts(), plan: plan).filter { $0.counted != $0.expected }.map(\.description)
    }

    func progressLine(plan: DemoEvents, elapsed: Duration) -> String {
        self.state.withLock { state in
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            return "  progress: \(state.statusByNotification.count)/\(plan.notificationCount) outcomes, "
                + "\(state.deadLetters.count)/\(plan.deadLetterCount) dead letters, "
                + String(format: "%.1f s   ", seconds)
        }
    }

    /// The summary table's rows: what, how many, where it was read.
    func rows(_ counts: Counts) -> [(name: String, count: Int, place: String)] {
        [
            ("delivered", counts.byStatus["delivered"] ?? 0, self.outcomes.outcomes),
            ("rejected", counts.byStatus["rejected"] ?? 0, self.outcomes.outcomes),
            ("failed", counts.byStatus["failed"] ?? 0, self.outcomes.outcomes),
            ("expired", counts.byStatus["expired"] ?? 0, self.outcomes.outcomes),
            ("dead-lettered", counts.deadLetters, self.outcomes.deadLetters),
            ("invalid tokens", counts.invalidTokens, self.outcomes.invalidTokens),
            ("unmatched (skipped)", counts.unmatchedEvents, Self.unmatchedMetric),
        ]
    }

    func summary(plan: DemoEvents, simulator: SimulatorStatistics) -> String {
        let counts = self.counts()
        var text = "\n  result                 count   where\n"
        text += "  --------------------  ------  ------------------------------\n"
        for (name, count, place) in self.rows(counts) {
            text +=
                "  " + name.padding(toLength: 20, withPad: " ", startingAt: 0)
                + String(repeating: " ", count: max(1, 8 - String(count).count)) + "\(count)  \(place)\n"
        }
        let checks = Self.checks(counts, plan: plan).map(\.description)
        text += "\n  \(plan.events.count) events: " + checks.joined(separator: "; ") + ".\n"
        text +=
            "  The simulator received \(simulator.requestsReceived) requests "
            + "(\(simulator.byStatus[200] ?? 0) answered 200).\n"
        return text
    }
}
