import Configuration
import Crypto
import Foundation
import Kafka
import Logging
import Prometheus
import Testing

@testable import Bridge
@testable import BridgeCore

/// The librdkafka settings `pushbridge run` changes from librdkafka's defaults, and that the configuration can
/// override them (docs/configuration.md, `kafka.producer_properties` and `consumer_properties`).
@Suite("The runtime's Kafka defaults")
struct RuntimeKafkaDefaultsTests {
    /// A runtime for a configuration whose `kafka:` section ends with `extraKafka` (YAML indented by two spaces).
    func runtime(_ extraKafka: String = "") throws -> BridgeRuntime {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("defaults-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyFile = directory.appendingPathComponent("AuthKey.p8")
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: keyFile)
        let yaml = """
            kafka:
              bootstrap_servers: "127.0.0.1:9092"
              group_id: pushbridge
            \(extraKafka)
            apns:
              environment: sandbox
              auth:
                type: token
                key_file: \(keyFile.path)
                key_id: KEY0000001
                team_id: TEAM000001
            routes:
              - name: alerts
                input_topic: events
                device_tokens: "{{tokens}}"
                topic: com.example.app
                payload:
                  aps:
                    alert: "{{text}}"
            outcomes:
              topic: outcomes
              invalid_tokens_topic: invalid-tokens
              dead_letter_topic: dead-letters

            """
        let loaded = try ConfigurationLoader(environment: [:]).load(yaml: yaml, file: "test.yaml")
        return BridgeRuntime(loaded: loaded, registry: PrometheusCollectorRegistry(), logger: Logger(label: "test"))
    }

    @Test("the outcome producer lingers 50 ms unless the configuration says otherwise")
    func producerLinger() throws {
        let defaults = try self.runtime().producerConfiguration(bootstrapServers: "b:9092")
        #expect(defaults.properties["linger.ms"] == "50")

        let producer = try self.runtime("  producer_properties:\n    linger.ms: 5")
            .producerConfiguration(bootstrapServers: "b:9092")
        #expect(producer.properties["linger.ms"] == "5")

        // librdkafka's other name for the same setting wins too, and the default is then not set beside it.
        let alias = try self.runtime("  producer_properties:\n    queue.buffering.max.ms: 0")
            .producerConfiguration(bootstrapServers: "b:9092")
        #expect(alias.properties["queue.buffering.max.ms"] == "0")
        #expect(alias.properties["linger.ms"] == nil)

        let shared = try self.runtime("  properties:\n    linger.ms: 10")
            .producerConfiguration(bootstrapServers: "b:9092")
        #expect(shared.properties["linger.ms"] == "10")
    }

    @Test("both clients wait at most 2 s between attempts to reach a broker, unless configured otherwise")
    func reconnectBackoff() throws {
        let runtime = try self.runtime()
        #expect(
            runtime.producerConfiguration(bootstrapServers: "b:9092").properties["reconnect.backoff.max.ms"] == "2000")
        #expect(
            runtime.consumerConfiguration(bootstrapServers: "b:9092").properties["reconnect.backoff.max.ms"] == "2000")
        let set = try self.runtime("  properties:\n    reconnect.backoff.max.ms: 10000")
        #expect(set.producerConfiguration(bootstrapServers: "b:9092").properties["reconnect.backoff.max.ms"] == "10000")
        #expect(set.consumerConfiguration(bootstrapServers: "b:9092").properties["reconnect.backoff.max.ms"] == "10000")
    }

    @Test("the consumer prefetches 16 MiB and waits at most 100 ms per empty fetch, unless configured otherwise")
    func consumerPrefetch() throws {
        let defaults = try self.runtime().consumerConfiguration(bootstrapServers: "b:9092")
        #expect(defaults.properties["queued.max.messages.kbytes"] == "16384")
        #expect(defaults.properties["fetch.wait.max.ms"] == "100")
        let properties = "  consumer_properties:\n    queued.max.messages.kbytes: 65536\n    fetch.wait.max.ms: 500"
        let set = try self.runtime(properties).consumerConfiguration(bootstrapServers: "b:9092")
        #expect(set.properties["queued.max.messages.kbytes"] == "65536")
        #expect(set.properties["fetch.wait.max.ms"] == "500")
    }

    @Test("the group: cooperative-sticky assignment, a 15 s session and 1 s heartbeats, unless configured otherwise")
    func groupDefaults() throws {
        let defaults = try self.runtime().consumerConfiguration(bootstrapServers: "b:9092")
        #expect(defaults.properties["partition.assignment.strategy"] == "cooperative-sticky")
        #expect(defaults.properties["session.timeout.ms"] == "15000")
        #expect(defaults.properties["heartbeat.interval.ms"] == "1000")
        let properties =
            "  consumer_properties:\n    partition.assignment.strategy: range\n    session.timeout.ms: 45000"
        let set = try self.runtime(properties).consumerConfiguration(bootstrapServers: "b:9092")
        #expect(set.properties["partition.assignment.strategy"] == "range")
        #expect(set.properties["session.timeout.ms"] == "45000")
        #expect(set.properties["heartbeat.interval.ms"] == "1000")
        #expect(defaults.properties["reconnect.backoff.max.ms"] == "2000")
        // Shared properties reach the consumer too.
        let shared = try self.runtime("  properties:\n    heartbeat.interval.ms: 3000").consumerConfiguration(
            bootstrapServers: "b:9092")
        #expect(shared.properties["heartbeat.interval.ms"] == "3000")
    }
}
