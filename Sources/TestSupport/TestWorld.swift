import APNSCore
import APNSSimulator
import Foundation
import Kafka

/// The world an integration test runs in: a Kafka broker with the test's topics (librdkafka's mock cluster of its
/// own, or topics of their own on a broker shared by a suite), the APNs simulator over TLS + HTTP/2 trusting a
/// fresh `.p8` provider key, and a directory holding the TLS material, that key and whatever else the test writes
/// (configuration files, logs).
///
/// Open one with ``withTestWorld(_:_:)``, which closes it however the test ends. The bridge's end-to-end
/// tests and `pushbridge doctor`'s tests each add what they need on top (their configuration files).
package final class TestWorld: Sendable {
    /// The topics of the bridge's three result records: outcomes, invalid tokens, dead letters.
    package static let resultTopicNames = [
        "pushbridge.outcomes", "pushbridge.invalid-tokens", "pushbridge.dead-letters",
    ]

    /// What a world is made of.
    package struct Configuration: Sendable {
        /// The topics to create, by their names before ``TestWorld/topic(_:)`` prefixes them.
        package var topics: [(name: String, partitions: Int32)]
        /// The simulator's scenario; its JWT key (and with ``acceptsClientCertificates`` its client CA) is filled
        /// in by the world.
        package var scenario: SimulatorScenario
        /// The key ID and team ID the simulator trusts the provider key as.
        package var keyID: String
        package var teamID: String
        /// The file in ``TestWorld/directory`` the provider key is written to.
        package var keyFile: String
        /// Prefixes the common names of the TLS material.
        package var tlsName: String
        /// Whether the simulator authenticates clients by certificates the world's CA signed.
        package var acceptsClientCertificates: Bool
        /// The simulator's clock.
        package var simulatorClock: any WallClock
        /// A broker shared with other tests; `nil` makes a mock cluster for this world.
        package var broker: (any TestKafkaBroker)?
        /// On a shared broker, topic names start with this, a short random part and a dot.
        package var sharedTopicPrefix: String

        /// A world with `topics` and a simulator for `scenario` trusting a key as `keyID` of `teamID`.
        package init(
            topics: [(name: String, partitions: Int32)],
            scenario: SimulatorScenario = SimulatorScenario(),
            keyID: String,
            teamID: String,
            keyFile: String = "AuthKey.p8",
            tlsName: String = "PushBridge Test",
            acceptsClientCertificates: Bool = false,
            simulatorClock: any WallClock = SystemWallClock(),
            broker: (any TestKafkaBroker)? = nil,
            sharedTopicPrefix: String = "test"
        ) {
            self.topics = topics
            self.scenario = scenario
            self.keyID = keyID
            self.teamID = teamID
            self.keyFile = keyFile
            self.tlsName = tlsName
            self.acceptsClientCertificates = acceptsClientCertificates
            self.simulatorClock = simulatorClock
            self.broker = broker
            self.sharedTopicPrefix = sharedTopicPrefix
        }
    }

    /// The broker: a mock cluster of this world's own, or a broker shared with other tests.
    package let broker: any TestKafkaBroker
    /// Whether ``close()`` closes the broker (a mock cluster made for this world).
    private let ownsBroker: Bool
    /// Prefixed to every topic name on a shared broker, so that each world has topics of its own; empty otherwise.
    package let topicPrefix: String
    /// The TLS material: CA, server and client certificates.
    package let tls: TestTLS
    /// The APNs simulator, on the TLS material's server certificate.
    package let simulator: APNSSimulatorServer

    /// The directory of the TLS material, the provider key and the test's own files.
    package var directory: URL { self.tls.directory }

    /// The mock cluster, for the tests that make it fail.
    package var cluster: KafkaMockCluster {
        guard let cluster = self.broker as? KafkaMockCluster else { preconditionFailure("not a mock cluster") }
        return cluster
    }

    /// Starts the broker (or takes the shared one) with the topics, and the simulator. What started is stopped
    /// again when a later step fails.
    package init(_ configuration: Configuration) async throws {
        let broker = try configuration.broker ?? KafkaMockCluster(brokerCount: 1, properties: ["log_level": "0"])
        let ownsBroker = configuration.broker == nil
        let prefix =
            ownsBroker ? "" : "\(configuration.sharedTopicPrefix)-\(UUID().uuidString.prefix(8).lowercased())."
        var tls: TestTLS?
        let simulator: APNSSimulatorServer
        do {
            for topic in configuration.topics {
                try await broker.addTopic(prefix + topic.name, partitions: topic.partitions)
            }
            let material = try TestTLS.generate(name: configuration.tlsName)
            tls = material
            var scenario = configuration.scenario
            if configuration.acceptsClientCertificates {
                scenario.clientCAFile = material.caCertificatePath
            }
            simulator = try await material.startSimulator(
                scenario: scenario, keyID: configuration.keyID, teamID: configuration.teamID,
                keyFile: configuration.keyFile, clock: configuration.simulatorClock)
        } catch {
            tls?.remove()
            if ownsBroker, let cluster = broker as? KafkaMockCluster { cluster.close() }
            throw error
        }
        self.broker = broker
        self.ownsBroker = ownsBroker
        self.topicPrefix = prefix
        self.tls = tls!
        self.simulator = simulator
    }

    /// Stops the simulator, closes a mock cluster of this world's own and deletes the directory.
    package func close() async {
        await self.simulator.shutdown()
        if self.ownsBroker, let cluster = self.broker as? KafkaMockCluster { cluster.close() }
        self.tls.remove()
    }

    /// The name of the world's topic `name` on the broker.
    package func topic(_ name: String) -> String { self.topicPrefix + name }

    /// The path of `name` in the world's directory.
    package func path(_ name: String) -> String { self.directory.appendingPathComponent(name).path }

    /// Writes `text` into the world's directory as `name`; returns its path.
    @discardableResult
    package func write(_ text: String, to name: String) throws -> String {
        let url = self.directory.appendingPathComponent(name)
        try Data(text.utf8).write(to: url)
        return url.path
    }

    /// Reads `topics` of this world's broker back (``readBack(_:from:as:timeout:until:)``).
    package func readBack<Records: ReadBackRecords>(
        _ topics: [String], as type: Records.Type = Records.self, timeout: Duration,
        until done: @escaping @Sendable (Records) -> Bool
    ) async throws -> (records: Records, complete: Bool) {
        try await TestSupport.readBack(topics, from: self.broker, as: type, timeout: timeout, until: done)
    }

    /// The committed offsets of `group` on this world's broker (``committedOffsets(_:group:topic:partitions:)``).
    package func committedOffsets(group: String, topic: String, partitions: Int32) async throws -> [Int32: Int64] {
        try await TestSupport.committedOffsets(self.broker, group: group, topic: topic, partitions: partitions)
    }
}

/// Opens a world for `configuration`, runs `body` in it, and closes the world when `body` returns or throws.
package func withTestWorld<Result>(
    _ configuration: TestWorld.Configuration,
    _ body: (TestWorld) async throws -> Result
) async throws -> Result {
    let world = try await TestWorld(configuration)
    let result: Result
    do {
        result = try await body(world)
    } catch {
        await world.close()
        throw error
    }
    await world.close()
    return result
}
