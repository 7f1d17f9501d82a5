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
    /// What `pushbridge doctor` printed and how it ended, for a setup whose topics are on the suite's Tansu and
    /// whose `kafka.bootstrap_servers` is `address`: Tansu itself, or one of the proxies in front of it.
    struct Run {
        var status: Int32
        var lines: [String]
        var output: String
    }

    func doctor(_ broker: TansuBroker, at address: String) async throws -> Run {
        return try await withDoctorSetup(broker: broker) { setup in
            let path = try setup.configuration(bootstrapServers: address)
            let result = try await PushBridgeExecutable.run(["doctor", "--config", path, "--kafka-timeout", "3"])
            return Run(
                status: result.status, lines: result.standardOutput.split(separator: "\n").map(String.init),
                output: result.standardOutput + result.standardError
            )
        }
    }

    @Test func passesEveryCheckThroughTheApiVersionsProxy() async throws {
        let broker = try TansuBroker.current()
        let run = try await self.doctor(broker, at: broker.bootstrapServers)
        #expect(run.status == 0, "\(run.output)")
        #expect(run.lines.contains { $0.hasPrefix("ok   kafka reachable: \(broker.bootstrapServers): 1 broker") })
        #expect(run.lines.contains { $0.hasPrefix("ok   kafka topics: all present") })
        #expect(run.lines.last == "7 checks: 0 failed, 0 warnings")
    }

    @Test func namesTheApiVersionsTaggedFieldsBugAndItsFixWithoutTheProxy() async throws {
        let broker = try TansuBroker.current()
        let run = try await self.doctor(broker, at: broker.directAddress)
        #expect(run.status == 1, "\(run.output)")
        let line = try #require(run.lines.first { $0.hasPrefix("FAIL kafka reachable: ") }, "\(run.output)")
        #expect(line.contains("\(broker.directAddress) answers, but librdkafka \(KafkaKnownCause.librdkafkaVersion)"))
        #expect(line.contains("skips tagged fields one byte short"))
        #expect(line.contains("PR #4278"))
        #expect(line.contains("(fix: run PushBridge linked against librdkafka 2.2.0 or newer"))
        #expect(!line.contains("no metadata"))
        #expect(run.lines.contains { $0.hasPrefix("WARN kafka topics: not checked") })
    }

    /// The evidence behind docs/kafka.md's "Apache Kafka brokers are not affected": the same Tansu, but its
    /// ApiVersions tagged fields replaced by the three an Apache Kafka KRaft broker sends (SupportedFeatures,
    /// FinalizedFeaturesEpoch >= 0, FinalizedFeatures, encoded as Apache Kafka's serializer writes them).
    @Test func librdkafkaReadsTheApiVersionsTaggedFieldsOfAnApacheKafkaKRaftBroker() async throws {
        let broker = try TansuBroker.current()
        let run = try await self.doctor(broker, at: broker.kafkaShapedAddress)
        #expect(run.status == 0, "\(run.output)")
        #expect(run.lines.contains { $0.hasPrefix("ok   kafka reachable: \(broker.kafkaShapedAddress): 1 broker") })
        #expect(run.lines.contains { $0.hasPrefix("ok   kafka topics: all present") })
    }
}
