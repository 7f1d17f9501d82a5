import APNSSimulator
import Foundation
import Kafka
import TestSupport
import TestWaiting
import Testing

@testable import Bridge
@testable import BridgeCore

// `pushbridge run` as a child process against a broker that is not librdkafka's own mock: Tansu 0.6.0, behind the
// test-only proxy that lets librdkafka 2.0.2 read its ApiVersions answers (docs/kafka.md, "The real-broker lane").
// Group joins on Tansu are slow (seconds with these settings, 23 s with librdkafka's defaults: docs/kafka.md), so
// each test joins as few times as it can: the records are read back and the commits asked for without joining
// (KafkaConsumer(configuration:readingFromStart:logger:)).

@Suite(
    "End to end on a real broker (Tansu)", .serialized,
    .tansuInstalled, .sharedTansuBroker,
    .timeLimit(.minutes(5))
)
struct RealBrokerEndToEndTests {
    @Test("every event is accounted for, records match their schemas, commits reach the end; a restart resumes there")
    func accountingAndRestart() async throws {
        let accounting = AccountingScenario()
        try await withEndToEnd(scenario: accounting.simulatorScenario, broker: try TansuBroker.current()) { world in
            let group = "pushbridge-\(UUID())"
            let perPartition = try await world.produce(accounting.events)
            let path = try world.configuration(group: group)

            let first = try BridgeProcess.start(
                configurationPath: path, log: world.directory.appendingPathComponent("first.log"))
            let results = try await world.results(timeout: .seconds(120), until: accounting.isComplete)
            first.kill(signal: SIGTERM)
            #expect(await first.waitForExit() == 0, "\(world.log("first.log"))")
            try await accounting.check(results, world: world)
            #expect(try await world.committed(group: group) == perPartition)

            // More events, then a second run: it starts from the committed offsets, so only the new events are
            // processed (a run that started from the beginning would repeat every outcome above).
            let more = (0..<12).map { EndToEnd.alert([EndToEnd.token(5000 + $0)]) }
            let added = try await world.produce(more)
            let second = try BridgeProcess.start(
                configurationPath: path, log: world.directory.appendingPathComponent("second.log"))
            let total = accounting.notificationCount + more.count
            let after = try await world.results(timeout: .seconds(120)) { $0.outcomes.count >= total }
            // Give a run that wrongly started over the time to write its repeats before stopping it.
            try await Task.sleep(for: .seconds(1))
            second.kill(signal: SIGTERM)
            #expect(await second.waitForExit() == 0, "\(world.log("second.log"))")
            let final = try await world.results(timeout: .seconds(10), expectComplete: false) { _ in false }
            #expect(final.outcomes.count == after.outcomes.count)
            #expect(final.outcomes.count == total)
            #expect(final.notificationIDs.count == total)
            #expect(world.simulator.statistics.requestsReceived == accounting.expectedRequests + more.count)
            #expect(try await world.committed(group: group) == perPartition.merging(added, uniquingKeysWith: +))
        }
    }

    @Test("two instances split the partitions; when one stops the other takes them over: nothing lost or repeated")
    func twoInstancesRebalance() async throws {
        var scenario = SimulatorScenario()
        scenario.latency = .milliseconds(5)
        try await withEndToEnd(scenario: scenario, broker: try TansuBroker.current()) { world in
            let group = "pushbridge-\(UUID())"
            let ports = (try freeLoopbackPort(), try freeLoopbackPort())
            let pathA = try world.configuration(group: group, adminListen: "127.0.0.1:\(ports.0)", name: "a")
            let pathB = try world.configuration(group: group, adminListen: "127.0.0.1:\(ports.1)", name: "b")

            // Both start together, so that they join one generation of the group (each rebalance costs seconds here).
            let instanceA = try BridgeProcess.start(
                configurationPath: pathA, log: world.directory.appendingPathComponent("a.log"))
            let instanceB = try BridgeProcess.start(
                configurationPath: pathB, log: world.directory.appendingPathComponent("b.log"))
            // An instance reports lag for the partitions it was assigned (every 5 s): once both report some, the
            // group has a generation with both members (a partition reported by both was moved by a rebalance).
            _ = try await eventually(timeout: .seconds(90), every: .milliseconds(500)) {
                let a = await Self.assignedPartitions(adminPort: ports.0)
                let b = await Self.assignedPartitions(adminPort: ports.1)
                return !a.isEmpty && !b.isEmpty
            }
            let firstBatch = 200
            var produced = try await world.produce((0..<firstBatch).map { EndToEnd.alert([EndToEnd.token($0)]) })
            _ = try await world.results(timeout: .seconds(90)) { Set($0.outcomes.map(\.token)).count >= firstBatch }
            let consumedA = await Self.consumedEvents(adminPort: ports.0)
            let consumedB = await Self.consumedEvents(adminPort: ports.1)
            #expect(consumedA > 0 && consumedB > 0, "the partitions were not split: A \(consumedA), B \(consumedB)")
            #expect(consumedA + consumedB == firstBatch)

            // A leaves; B is assigned all four partitions after the rebalance and processes the second batch alone.
            instanceA.kill(signal: SIGTERM)
            #expect(await instanceA.waitForExit() == 0, "\(world.log("a.log"))")
            let secondBatch = 200
            let added = try await world.produce(
                (firstBatch..<(firstBatch + secondBatch)).map { EndToEnd.alert([EndToEnd.token($0)]) })
            produced.merge(added, uniquingKeysWith: +)
            let total = firstBatch + secondBatch
            let complete: @Sendable (Results) -> Bool = { Set($0.outcomes.map(\.token)).count >= total }
            var last = instanceB
            // Tansu's coordinator sometimes never hands a departed member's partitions to the one left (docs/kafka.md,
            // "The real-broker lane"): B then stops gracefully and a new B of the same group takes over, which
            // proves the same (nothing lost, nothing repeated, commits at the end) without waiting on Tansu's stall.
            if !complete(try await world.results(timeout: .seconds(60), expectComplete: false, until: complete)) {
                instanceB.kill(signal: SIGTERM)
                #expect(await instanceB.waitForExit() == 0, "\(world.log("b.log"))")
                last = try BridgeProcess.start(
                    configurationPath: pathB, log: world.directory.appendingPathComponent("b2.log"))
            }
            _ = try await world.results(timeout: .seconds(120), until: complete)
            last.kill(signal: SIGTERM)
            #expect(await last.waitForExit() == 0, "\(world.log("b.log"))\n\(world.log("b2.log"))")

            let results = try await world.results(timeout: .seconds(10), expectComplete: false) { _ in false }
            #expect(Set(results.outcomes.map(\.token)) == Set((0..<total).map { EndToEnd.token($0) }), "lost")
            #expect(results.outcomes.count == total, "repeated: \(results.outcomes.count - total) outcomes")
            #expect(results.outcomes.allSatisfy { $0.status == "delivered" })
            #expect(try await world.committed(group: group) == produced)
        }
    }

    /// The partitions an instance reports `pushbridge_consumer_lag` for (those it was assigned at some point).
    static func assignedPartitions(adminPort: Int) async -> Set<String> {
        guard let metrics = try? await httpGet(port: adminPort, path: "/metrics").1 else { return [] }
        return Set(
            metrics.split(separator: "\n").filter { $0.hasPrefix("pushbridge_consumer_lag{") }.compactMap {
                $0.split(separator: "partition=\"").last?.split(separator: "\"").first.map(String.init)
            })
    }

    /// The sum of an instance's `pushbridge_events_consumed_total`.
    static func consumedEvents(adminPort: Int) async -> Int {
        guard let metrics = try? await httpGet(port: adminPort, path: "/metrics").1 else { return 0 }
        var total = 0
        for line in metrics.split(separator: "\n") where line.hasPrefix("pushbridge_events_consumed_total") {
            total += Int(Double(line.split(separator: " ").last ?? "") ?? 0)
        }
        return total
    }
}

extension EndToEnd {
    /// The text of a log file in the world's directory (for failure messages).
    func log(_ name: String) -> String {
        (try? String(contentsOf: self.directory.appendingPathComponent(name), encoding: .utf8)) ?? ""
    }
}
