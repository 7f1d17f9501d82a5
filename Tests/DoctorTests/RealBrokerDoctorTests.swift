import Foundation
import Kafka
import TestSupport
import Testing

@testable import DoctorChecks

/// `pushbridge doctor` against a broker that is not librdkafka's own mock: Tansu 0.6.0 (docs/kafka.md, "The
/// real-broker lane"). Doctor's Kafka checks join no group, so these tests are quick.
@Suite(
    "pushbridge doctor on a real broker (Tansu)",
    .tansuInstalled, .sharedTansuBroker,
    .timeLimit(.minutes(2))
)
struct RealBrokerDoctorTests {
    @Test func passesEveryCheckThroughTheApiVersionsProxy() async throws {
        let broker = try TansuBroker.current()
        let setup = try await DoctorSetup(broker: broker)
        let result = try await PushBridgeExecutable.run(["doctor", "--config", try setup.configuration()])
        await setup.close()
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("ok   kafka reachable: \(broker.bootstrapServers): 1 broker") })
        #expect(lines.contains { $0.hasPrefix("ok   kafka topics: all present") })
        #expect(lines.last == "7 checks: 0 failed, 0 warnings")
    }

    @Test func namesTheApiVersionsTaggedFieldsBugAndItsFixWithoutTheProxy() async throws {
        let broker = try TansuBroker.current()
        let setup = try await DoctorSetup(broker: broker)
        let path = try setup.configuration(bootstrapServers: broker.directAddress)
        let result = try await PushBridgeExecutable.run(["doctor", "--config", path, "--kafka-timeout", "3"])
        await setup.close()
        #expect(result.status == 1, "\(result.standardOutput)\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        let line = try #require(lines.first { $0.hasPrefix("FAIL kafka reachable: ") }, "\(lines)")
        #expect(line.contains("\(broker.directAddress) answers, but librdkafka \(KafkaKnownCause.librdkafkaVersion)"))
        #expect(line.contains("skips tagged fields one byte short"))
        #expect(line.contains("PR #4278"))
        #expect(line.contains("(fix: run PushBridge linked against librdkafka 2.2.0 or newer"))
        #expect(!line.contains("no metadata"))
        #expect(lines.contains { $0.hasPrefix("WARN kafka topics: not checked") })
    }

    /// The evidence behind docs/kafka.md's "Apache Kafka brokers are not affected": the same Tansu, but its
    /// ApiVersions tagged fields replaced by the three an Apache Kafka KRaft broker sends (SupportedFeatures,
    /// FinalizedFeaturesEpoch >= 0, FinalizedFeatures, encoded as Apache Kafka's serializer writes them).
    @Test func librdkafkaReadsTheApiVersionsTaggedFieldsOfAnApacheKafkaKRaftBroker() async throws {
        let broker = try TansuBroker.current()
        let setup = try await DoctorSetup(broker: broker)
        let path = try setup.configuration(bootstrapServers: broker.kafkaShapedAddress)
        let result = try await PushBridgeExecutable.run(["doctor", "--config", path, "--kafka-timeout", "5"])
        await setup.close()
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("ok   kafka reachable: \(broker.kafkaShapedAddress): 1 broker") })
        #expect(lines.contains { $0.hasPrefix("ok   kafka topics: all present") })
    }
}
